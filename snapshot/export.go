package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/repo"
)

// ExportOptions tune Export.
type ExportOptions struct {
	// IncludeSensitive copies the snapshot's sensitive part (browser
	// profiles) too. Both keys must unlock the sensitive tier. Without it
	// the exported snapshot has no sensitive part and no sensitive object
	// is written to the target.
	IncludeSensitive bool
}

// ErrExportSensitive: IncludeSensitive was asked with a key (source or
// target) that lacks the sensitive tier. It wraps crypt.ErrTierLocked.
var ErrExportSensitive = errors.New("--include-sensitive needs keys with the sensitive tier in both repositories")

// Export copies snapshot m of src into dst and returns the new manifest.
//
// Blob ids are keyed per repository and tier, and chunk cut points depend
// on the repository's secret polynomial, so nothing can be copied as it is:
// every file is read from src as a stream and saved into dst with dst's
// chunker (so it deduplicates against dst's own data), and every tree is
// rewritten with the new ids, bottom up. dst is flushed before its manifest
// is saved. The new manifest keeps the workspace, time, host, tags, totals
// and errors, and has no parent (the parent's id means nothing in dst).
func Export(ctx context.Context, src, dst *repo.Repository, m *Manifest, o ExportOptions) (*Manifest, error) {
	// Writing into dst is a capture session there: a two-phase prune of
	// dst beside the export never deletes what it reuses (repo.Session).
	sess, err := dst.BeginSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	x := &exporter{ctx: ctx, src: src, dst: dst, trees: map[string][]blob.ID{}}
	var part *SensitivePart
	if o.IncludeSensitive && m.Sensitive != nil {
		for _, r := range []*repo.Repository{src, dst} {
			if _, err := r.TierKeys(blob.Sensitive); err != nil {
				return nil, fmt.Errorf("%w (%s): %w", ErrExportSensitive, r.Backend().Location(), err)
			}
		}
		p, err := LoadSensitivePart(ctx, src, m)
		if err != nil {
			return nil, err
		}
		part = p
	}
	root := m.Root
	sub, err := x.dir(blob.Workspace, root.Subtree)
	if err != nil {
		return nil, err
	}
	root.Subtree = sub
	nm := &Manifest{Workspace: m.Workspace, Time: m.Time, Host: m.Host, Instance: m.Instance, Paths: m.Paths, Tags: m.Tags,
		Root: root, Totals: m.Totals, Complete: m.Complete, Errors: m.Errors}
	if part != nil {
		np := SensitivePart{Version: SensitivePartVersion, Salt: make([]byte, 16)}
		_, _ = rand.Read(np.Salt) // crypto/rand.Read does not fail on Linux
		for _, t := range part.Trees {
			if t.Root.Subtree, err = x.dir(blob.Sensitive, t.Root.Subtree); err != nil {
				return nil, fmt.Errorf("sensitive tree %s: %w", t.Path, err)
			}
			np.Trees = append(np.Trees, t)
		}
		b, err := json.Marshal(&np)
		if err != nil {
			return nil, err
		}
		id, _, err := dst.SaveBlob(ctx, blob.Sensitive, blob.Tree, b)
		if err != nil {
			return nil, err
		}
		nm.Sensitive = &id
	}
	if err := dst.Flush(ctx); err != nil {
		return nil, fmt.Errorf("export: flushing %s: %w", dst.Backend().Location(), err)
	}
	save := func(ctx context.Context) error {
		if _, err := SaveManifest(ctx, dst, nm); err != nil {
			return fmt.Errorf("export: saving the snapshot in %s: %w", dst.Backend().Location(), err)
		}
		return nil
	}
	undo := func(ctx context.Context) error {
		return dst.RemoveFile(ctx, backend.Handle{Type: backend.Snapshot, Name: nm.ID.String()})
	}
	if err := sess.Commit(ctx, save, undo); err != nil {
		return nil, err
	}
	return nm, nil
}

// exporter copies trees and file contents from src to dst.
type exporter struct {
	ctx      context.Context
	src, dst *repo.Repository
	trees    map[string][]blob.ID // source subtree ids -> target ids, for repeated directories
}

// dir copies the directory listed by subtree (tier t) and returns the
// target's subtree ids.
func (x *exporter) dir(t blob.Tier, subtree []blob.ID) ([]blob.ID, error) {
	var key strings.Builder
	key.WriteByte(byte(t))
	for _, id := range subtree {
		key.Write(id[:])
	}
	if ids, ok := x.trees[key.String()]; ok {
		return ids, nil
	}
	var nodes []Node
	err := LoadDir(x.ctx, x.src, t, subtree, func(n *Node) error {
		c := *n
		if err := c.Valid(); err != nil {
			return err
		}
		var err error
		switch c.Type {
		case TypeDir:
			c.Subtree, err = x.dir(t, c.Subtree)
		case TypeFile:
			if len(c.Content) > 0 {
				c.Content, err = x.file(t, c.Content)
			}
		}
		nodes = append(nodes, c)
		if err != nil {
			return fmt.Errorf("%q: %w", n.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids, err := SaveDir(x.ctx, x.dst, t, nodes)
	if err != nil {
		return nil, err
	}
	x.trees[key.String()] = ids
	return ids, nil
}

// file streams a file's content from src into dst, re-chunked.
func (x *exporter) file(t blob.Tier, content []blob.ID) ([]blob.ID, error) {
	pr, pw := io.Pipe()
	go func() {
		_, err := x.src.LoadStream(x.ctx, t, content, pw)
		pw.CloseWithError(err)
	}()
	ids, _, err := x.dst.SaveStream(x.ctx, t, pr)
	pr.CloseWithError(errors.New("export: stream abandoned"))
	return ids, err
}
