package snapshot

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
// rewritten with the new ids, bottom up. The chunks are read from src as
// one stream across files and directories, a window at a time, pack by
// pack (copyTree). dst is flushed before its manifest
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
	sub, err := x.copyTree(blob.Workspace, root.Subtree)
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
			if t.Root.Subtree, err = x.copyTree(blob.Sensitive, t.Root.Subtree); err != nil {
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
	trees    map[string][]blob.ID // dirKey of source directories -> target ids, for repeated directories

	ahead *TreesAhead // the tree being copied: its listings, read ahead
	feed  *exportFeed // its chunks, read ahead
}

// copyTree copies the directory listed by subtree (tier t) and returns
// the target's subtree ids. A walk ahead of the copy's own lists the
// chunks of every file in the order the copy takes them (chunks), and
// they are read from src as one stream, a window at a time and pack by
// pack, ahead of the copy (exportFeed): read a file at a time, a blob at a
// time, they cost a request each on S3. Each walk reads the listings
// ahead (TreesAhead), so each listing is read twice, in batches. The walk
// ahead only saves time: should it fail, the files it did not list are
// read one by one, and only the copy's own walk and reads fail the copy.
func (x *exporter) copyTree(t blob.Tier, subtree []blob.ID) ([]blob.ID, error) {
	x.ahead = NewTreesAhead(x.ctx, x.src, t, WalkAheadBounds, nil)
	defer x.ahead.Stop()
	x.feed = x.startFeed(t, subtree)
	defer x.feed.stop()
	return x.dir(t, subtree)
}

// Batches of the chunk ids the walk ahead hands the feed: exportBatch
// ids each (the last one fewer), and exportBatches waiting at most.
const (
	exportBatch   = 1024
	exportBatches = 16
)

// exportWalkLoader is what the walk ahead reads listings through; tests
// make it fail.
var exportWalkLoader = func(r *repo.Repository) BlobLoader { return r }

// chunks walks subtree as dir does (depth first in name order, a
// directory in seen, the ones copied before, or walked already once) and
// sends the chunks of its files, in that order, to out, in batches: the
// chunks of every file before a listing it fails to read, too.
func (x *exporter) chunks(ctx context.Context, t blob.Tier, subtree []blob.ID, seen map[string]bool, out chan<- []blob.ID) error {
	ahead := NewTreesAhead(ctx, exportWalkLoader(x.src), t, WalkAheadBounds, nil)
	defer ahead.Stop()
	var batch []blob.ID
	send := func() error {
		select {
		case out <- batch:
			batch = nil
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	add := func(ids []blob.ID) error {
		for len(ids) > 0 {
			if batch == nil {
				batch = make([]blob.ID, 0, exportBatch)
			}
			n := min(len(ids), exportBatch-len(batch))
			batch, ids = append(batch, ids[:n]...), ids[n:]
			if len(batch) == exportBatch {
				if err := send(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var walk func(subtree []blob.ID) error
	walk = func(subtree []blob.ID) error {
		k := dirKey(t, subtree)
		if seen[k] {
			ahead.Forget(subtree)
			return nil
		}
		seen[k] = true
		return ahead.LoadDir(ctx, subtree, func(n *Node) error {
			if err := n.Valid(); err != nil {
				return err
			}
			switch n.Type {
			case TypeDir:
				if err := walk(n.Subtree); err != nil {
					return fmt.Errorf("%q: %w", n.Name, err)
				}
			case TypeFile:
				return add(n.Content)
			}
			return nil
		})
	}
	err := walk(subtree)
	if len(batch) > 0 {
		if serr := send(); serr != nil {
			return serr
		}
	}
	return err
}

// dir copies the directory listed by subtree (tier t) and returns the
// target's subtree ids.
func (x *exporter) dir(t blob.Tier, subtree []blob.ID) ([]blob.ID, error) {
	key := dirKey(t, subtree)
	if ids, ok := x.trees[key]; ok {
		x.ahead.Forget(subtree)
		return ids, nil
	}
	var nodes []Node
	err := x.ahead.LoadDir(x.ctx, subtree, func(n *Node) error {
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
				c.Content, err = x.feed.copy(x.ctx, x.dst, t, c.Content)
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
	x.trees[key] = ids
	return ids, nil
}

// exportFeed reads the chunks of a copy's files from src as one stream
// (Repository.LoadBlobs), the ids coming from the walk ahead (chunks), and
// writes each file's into the pipe its copy reads, the files in the order
// the copy asks for them.
type exportFeed struct {
	files  chan exportFile
	cancel context.CancelFunc
	done   chan struct{}
}

// exportFile is a file the copy asks the feed for: its chunks, and the
// pipe to write them into.
type exportFile struct {
	content []blob.ID
	w       *io.PipeWriter
}

// errExportOrder: the copy asked for chunks other than the ones the feed
// reads next (the two walks of copyTree disagree).
var errExportOrder = errors.New("export: internal error: the chunks read ahead are not the ones the copy asks for")

// startFeed starts the walk ahead of subtree (tier t) and the reading of
// the chunks it lists.
func (x *exporter) startFeed(t blob.Tier, subtree []blob.ID) *exportFeed {
	ctx, cancel := context.WithCancel(x.ctx)
	f := &exportFeed{files: make(chan exportFile), cancel: cancel, done: make(chan struct{})}
	batches := make(chan []blob.ID, exportBatches)
	seen := make(map[string]bool, len(x.trees)) // x.trees is the copy's
	for k := range x.trees {
		seen[k] = true
	}
	var walkErr error
	walked := make(chan struct{})
	go func() {
		defer close(walked)
		defer close(batches)
		walkErr = x.chunks(ctx, t, subtree, seen, batches)
	}()
	lost := false // the walk ahead failed: the stream ends where it stopped
	next := func(ctx context.Context) ([]blob.ID, error) {
		select {
		case b, ok := <-batches:
			if !ok {
				lost = walkErr != nil // set before batches closed
			}
			return b, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	go func() {
		defer close(f.done)
		defer func() { <-walked }()
		var cur exportFile
		at := 0 // chunks of cur written
		take := func() bool {
			select {
			case cur = <-f.files:
				at = 0
				return true
			case <-ctx.Done():
				cur = exportFile{}
				return false
			}
		}
		err := x.src.LoadBlobs(ctx, t, blob.Data, next, func(id blob.ID, plain []byte) error {
			if cur.w == nil && !take() {
				return ctx.Err()
			}
			if cur.content[at] != id {
				return errExportOrder
			}
			at++
			if _, err := cur.w.Write(plain); err != nil {
				return err
			}
			if at == len(cur.content) {
				cur.w.Close() // its copy goes on while the next window is read
				cur.w = nil
			}
			return nil
		})
		// LoadBlobs' wait for its reader orders lost before this read.
		direct := err == nil && lost
		if direct {
			repo.Warnf(ctx, "export: reading ahead stopped (%v); the files after that point are read one by one", walkErr)
		}
		for {
			switch {
			case cur.w == nil:
			case direct: // what the walk ahead did not list (at is 0: it lists whole files)
				cur.w.CloseWithError(x.src.LoadBlobs(ctx, t, blob.Data, repo.BlobsOf(cur.content[at:]), func(_ blob.ID, plain []byte) error {
					_, err := cur.w.Write(plain)
					return err
				}))
			default:
				cur.w.CloseWithError(cmp.Or(err, errExportOrder))
			}
			if !take() {
				return
			}
		}
	}()
	return f
}

// copy streams a file's chunks, content, from the feed into dst,
// re-chunked, and returns the target's ids.
func (f *exportFeed) copy(ctx context.Context, dst *repo.Repository, t blob.Tier, content []blob.ID) ([]blob.ID, error) {
	pr, pw := io.Pipe()
	select {
	case f.files <- exportFile{content: content, w: pw}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ids, _, err := dst.SaveStream(ctx, t, pr)
	pr.CloseWithError(errors.New("export: stream abandoned"))
	return ids, err
}

// stop ends the feed and waits for it.
func (f *exportFeed) stop() {
	f.cancel()
	<-f.done
}
