package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"lifeboat/blob"
	"lifeboat/repo"
)

// SensitiveSpec names one subtree of a capture root that is saved in the
// sensitive tier instead of the workspace tree (a browser profile, say).
type SensitiveSpec struct {
	// Path is the subtree's slash path relative to the capture root. Each
	// of its components must be a real directory: a symlink anywhere on
	// the way is refused, never followed.
	Path string
	// Kind is a label recorded with the tree, such as "chromium".
	Kind string
	// Filter, when set, decides which entries of the subtree are kept, by
	// their slash path relative to Path (CaptureOptions.Filter).
	Filter func(rel string) bool
}

// ErrSensitivePath: a SensitiveSpec path is not a real directory inside the
// capture root.
var ErrSensitivePath = errors.New("sensitive tree path is not a directory inside the capture root")

// capturePart links a tree-only capture, or the workspace capture that
// follows them, to the sensitive part (see Capture: o.part).
type capturePart struct {
	tree     *SensitiveTree // a tree-only capture fills it and saves no manifest
	ref      *blob.ID       // the workspace manifest's reference to the part
	complete bool           // every sensitive tree was captured without errors
}

// apply hands a finished capture to the part. It reports true for a
// tree-only capture, whose manifest is not to be saved.
func (p *capturePart) apply(m *Manifest) bool {
	if p.tree != nil {
		p.tree.Root, p.tree.Totals, p.tree.Complete, p.tree.Errors = m.Root, m.Totals, m.Complete, m.Errors
		return true
	}
	m.Sensitive = p.ref
	m.Complete = m.Complete && p.complete
	return false
}

// captureSensitive captures each o.Sensitive subtree into the sensitive
// tier, saves the sensitive part that lists them, and then captures the
// rest of root into the workspace tier with a manifest that references
// the part by its id only.
//
// Order keeps the promotion rule: the trees and the part blob are saved
// before the workspace capture starts, and its Flush, which makes every
// tier's packs durable and indexed, precedes the manifest.
func captureSensitive(ctx context.Context, r *repo.Repository, root string, o CaptureOptions) (*Manifest, error) {
	if _, err := r.TierKeys(blob.Sensitive); err != nil {
		return nil, fmt.Errorf("capture: %d browser profile(s) go into the sensitive tier: %w", len(o.Sensitive), err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", root, err)
	}
	specs, err := checkSensitiveSpecs(abs, o.Sensitive)
	if err != nil {
		return nil, err
	}
	part := SensitivePart{Version: SensitivePartVersion, Salt: make([]byte, 16)}
	_, _ = rand.Read(part.Salt) // crypto/rand.Read does not fail on Linux
	if o.Progress == nil {
		o.Progress = NoProgress{}
	}
	complete := true
	for _, s := range specs {
		t := &SensitiveTree{Path: s.Path, Kind: s.Kind}
		so := o
		so.Sensitive, so.Tier, so.Filter, so.Cache, so.Excludes, so.Parent = nil, blob.Sensitive, s.Filter, nil, nil, nil
		so.Progress = prefixProgress{o.Progress, s.Path}
		so.part = &capturePart{tree: t}
		if _, err := Capture(ctx, r, filepath.Join(abs, filepath.FromSlash(s.Path)), so); err != nil {
			return nil, fmt.Errorf("capture of sensitive tree %s: %w", s.Path, err)
		}
		complete = complete && t.Complete
		part.Trees = append(part.Trees, *t)
	}
	b, err := json.Marshal(&part)
	if err != nil {
		return nil, err
	}
	id, _, err := r.SaveBlob(ctx, blob.Sensitive, blob.Tree, b)
	if err != nil {
		return nil, fmt.Errorf("capture: saving the sensitive part: %w", err)
	}
	// No flush here: the workspace capture below flushes every tier
	// before it saves the manifest, the one object that refers to this.
	wo := o
	wo.Sensitive = nil
	for _, s := range specs {
		wo.omit = append(wo.omit, s.Path)
	}
	wo.part = &capturePart{ref: &id, complete: complete}
	return Capture(ctx, r, root, wo)
}

// checkSensitiveSpecs cleans the paths and refuses empty, escaping,
// duplicate and nested ones, and any whose way from root passes a
// symlink or ends at something that is not a directory.
func checkSensitiveSpecs(root string, in []SensitiveSpec) ([]SensitiveSpec, error) {
	out := make([]SensitiveSpec, 0, len(in))
	for _, s := range in {
		comps, err := safeSplitInclude(filepath.ToSlash(s.Path))
		if err != nil || len(comps) == 0 {
			return nil, fmt.Errorf("%w: %q (give a directory below %s)", ErrSensitivePath, s.Path, root)
		}
		s.Path = strings.Join(comps, "/")
		p := root
		for _, c := range comps {
			p = filepath.Join(p, c)
			fi, err := os.Lstat(p)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrSensitivePath, s.Path, err)
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				return nil, fmt.Errorf("%w: %s: %s is a symlink, which is never followed; give the real directory", ErrSensitivePath, s.Path, p)
			}
			if !fi.IsDir() {
				return nil, fmt.Errorf("%w: %s: %s is not a directory", ErrSensitivePath, s.Path, p)
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b SensitiveSpec) int { return strings.Compare(a.Path, b.Path) })
	for i := 1; i < len(out); i++ {
		if a, b := out[i-1].Path, out[i].Path; a == b || strings.HasPrefix(b, a+"/") {
			return nil, fmt.Errorf("%w: %s and %s overlap; give each tree once", ErrSensitivePath, a, b)
		}
	}
	return out, nil
}

// prefixProgress reports a sensitive tree's errors under its path from the
// capture root; its counts go to the workspace capture's totals display.
type prefixProgress struct {
	p      Progress
	prefix string
}

func (p prefixProgress) Start(uint64, uint64)     {}
func (p prefixProgress) Done(files, bytes uint64) { p.p.Done(files, bytes) }
func (p prefixProgress) Error(path string, err error) {
	if path == "." || path == "" {
		path = p.prefix
	} else {
		path = p.prefix + "/" + path
	}
	p.p.Error(path, err)
}
