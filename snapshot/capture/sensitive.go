package capture

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
	"unicode/utf8"

	"lifeboat/blob"
	"lifeboat/repo"

	"lifeboat/snapshot"
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
	// their slash path relative to Path (Options.Filter).
	Filter func(rel string) bool
	// Prepare, when set, is called right before the subtree is captured
	// (after the workspace walk) and returns the Filter to use; an error
	// ends the capture. A browser profile's databases are checkpointed
	// there, so nothing the browser could do in between is missed.
	Prepare func(ctx context.Context) (filter func(rel string) bool, err error)
}

// Discoverer finds sensitive subtrees (browser profiles) during a
// capture's walk (Options.Discover); profile.Finder is one.
type Discoverer interface {
	// Detect reports whether the directory open as dirfd, whose entries
	// are names (all of them, excluded ones too), is a sensitive subtree,
	// and of which kind. It is asked about every directory below the
	// capture root, from several goroutines at once, and must only look.
	Detect(dirfd int, names []string) (kind string, ok bool)
	// Check is called for each subtree Detect found, by its slash path
	// from the capture root, on the walker's goroutine in walk order; an
	// error ends the capture there (a running browser is refused before
	// the rest of the workspace is read).
	Check(ctx context.Context, path, kind string) error
	// Prepare readies a found subtree right before it is captured, after
	// the walk (SensitiveSpec.Prepare), and returns its filter.
	Prepare(ctx context.Context, path, kind string) (filter func(rel string) bool, err error)
}

// ErrSensitivePath: a SensitiveSpec path is not a real directory inside the
// capture root.
var ErrSensitivePath = errors.New("sensitive tree path is not a directory inside the capture root")

// workspaceRole checks the given sensitive subtrees of a capture of root
// (a key with the sensitive tier is needed for any) and returns the role of
// its workspace tree: it leaves them out, and after its walk captures them
// and those o.Discover finds into the sensitive tier (captureTrees), and
// the sensitive part that lists them; the workspace manifest references
// the part by its id only.
//
// Order keeps the promotion rule: the trees and the part blob are saved
// before the workspace tree's Flush, which makes every tier's packs
// durable and indexed and precedes the manifest.
func workspaceRole(r *repo.Repository, root string, given []SensitiveSpec) (treeRole, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return treeRole{}, fmt.Errorf("capture %s: %w", root, err)
	}
	specs, err := checkSensitiveSpecs(abs, given)
	if err != nil {
		return treeRole{}, err
	}
	if len(specs) > 0 { // refused before anything is read
		if _, err := r.TierKeys(blob.Sensitive); err != nil {
			return treeRole{}, fmt.Errorf("capture: %d browser profile(s) go into the sensitive tier: %w", len(specs), err)
		}
	}
	t := treeRole{holdsPart: true, given: specs}
	for _, s := range specs {
		t.omit = append(t.omit, s.Path)
	}
	return t, nil
}

// discovered takes directory name of d, which Discover detected as a
// sensitive subtree of kind, for captureTrees: a given subtree inside it
// is refused, and so is whatever Check refuses.
func (c *capturer) discovered(d *capDir, name, kind string) error {
	rel := string(d.relPath(name))
	if !utf8.ValidString(rel) {
		c.record(d.errPath(name), fmt.Errorf("a %s found here is left out: its path is not valid UTF-8, which the sensitive part cannot record; rename the directory", kind))
		return nil
	}
	for _, s := range c.t.given {
		if strings.HasPrefix(s.Path, rel+"/") {
			return fmt.Errorf("%w: %s lies inside %s, a %s found in the walk; give one of them", ErrSensitivePath, s.Path, rel, kind)
		}
	}
	disc := c.o.Discover
	if err := disc.Check(c.ctx, rel, kind); err != nil {
		return err
	}
	c.found = append(c.found, SensitiveSpec{Path: rel, Kind: kind, Prepare: func(ctx context.Context) (func(string) bool, error) {
		return disc.Prepare(ctx, rel, kind)
	}})
	return nil
}

// captureTrees captures the given and the discovered subtrees of the
// workspace tree into the sensitive tier, once its walk is done, each as a
// tree of its own, and saves the sensitive part that lists them
// (c.partRef). With none, the manifest gets no part.
func (c *capturer) captureTrees() error {
	specs, err := checkSensitiveSpecs(c.rootPath, append(slices.Clip(c.t.given), c.found...))
	if err != nil || len(specs) == 0 {
		return err
	}
	if _, err := c.r.TierKeys(blob.Sensitive); err != nil {
		return fmt.Errorf("capture: %d browser profile(s) go into the sensitive tier: %w", len(specs), err)
	}
	part := snapshot.SensitivePart{Version: snapshot.SensitivePartVersion, Salt: make([]byte, 16)}
	_, _ = rand.Read(part.Salt) // crypto/rand.Read does not fail on Linux
	for _, s := range specs {
		if s.Prepare != nil {
			if s.Filter, err = s.Prepare(c.ctx); err != nil {
				return err
			}
		}
		t, err := c.captureTree(s)
		if err != nil {
			return fmt.Errorf("capture of sensitive tree %s: %w", s.Path, err)
		}
		c.partComplete = c.partComplete && t.Complete
		part.Trees = append(part.Trees, t)
	}
	b, err := json.Marshal(&part)
	if err != nil {
		return err
	}
	id, _, err := c.r.SaveBlob(c.ctx, blob.Sensitive, blob.Tree, b)
	if err != nil {
		return fmt.Errorf("capture: saving the sensitive part: %w", err)
	}
	// No flush here: the workspace tree's capture flushes every tier
	// before its manifest is saved, the one object that refers to this.
	c.partRef = &id
	return nil
}

// captureTree captures the sensitive subtree s of the workspace tree into
// the sensitive tier, with the capture's readers, clock and hooks, s's
// filter, and no file cache, excludes or discovery. Its errors are
// reported under s's path.
func (c *capturer) captureTree(s SensitiveSpec) (snapshot.SensitiveTree, error) {
	o := Options{Workspace: c.o.Workspace, Readers: c.o.Readers, Now: c.o.Now, Tier: blob.Sensitive, Filter: s.Filter,
		Progress: prefixProgress{c.o.Progress, s.Path}, hooks: c.o.hooks}
	tc, err := newCapturer(c.ctx, c.r, filepath.Join(c.rootPath, filepath.FromSlash(s.Path)), o, treeRole{inPart: true})
	if err != nil {
		return snapshot.SensitiveTree{}, err
	}
	defer tc.cancel(nil)
	m, err := tc.run()
	if err != nil {
		return snapshot.SensitiveTree{}, err
	}
	return snapshot.SensitiveTree{Path: s.Path, Kind: s.Kind, Root: m.Root, Totals: m.Totals, Complete: m.Complete, Errors: m.Errors}, nil
}

// checkSensitiveSpecs cleans the paths and refuses empty, escaping,
// duplicate and nested ones, and any whose way from root passes a
// symlink or ends at something that is not a directory.
func checkSensitiveSpecs(root string, in []SensitiveSpec) ([]SensitiveSpec, error) {
	out := make([]SensitiveSpec, 0, len(in))
	for _, s := range in {
		comps, err := snapshot.SplitPath(filepath.ToSlash(s.Path))
		if err != nil || len(comps) == 0 {
			return nil, fmt.Errorf("%w: %q (give a directory below %s)", ErrSensitivePath, s.Path, root)
		}
		if !utf8.ValidString(s.Path) {
			return nil, fmt.Errorf("%w: %q is not valid UTF-8, which the sensitive part cannot record; rename the directory", ErrSensitivePath, s.Path)
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
	p      snapshot.Progress
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
