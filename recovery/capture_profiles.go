package recovery

import (
	"context"
	"fmt"
	"path/filepath"

	"lifeboat/checkpoint"
	"lifeboat/profile"
	"lifeboat/providers"
)

// profileNamer is a Capturer that names browser profiles of some
// workspaces: the lifecycle checks them before it does anything for a
// capture, so a bad one leaves the workspace as it was.
type profileNamer interface {
	// namesProfiles reports whether the Capturer names profiles of ws.
	namesProfiles(ws string) bool
	// profiles resolves them in root, the workspace's files.
	profiles(ws, root string) ([]profile.Profile, error)
}

// browserChecker is a Capturer that checks each browser profile it
// captures for a running browser before it reads any of it, failing with
// profile.ErrBrowserRunning: for the workspaces it says it does so for,
// the lifecycle waits for browsers only after such a failure.
type browserChecker interface {
	// checksBrowsers reports whether every profile of workspace ws is
	// checked (found by the capture's own walk).
	checksBrowsers(ws string) bool
}

// checksBrowsers: the walk finds every profile, unless discovery is off.
func (c *RepoCapturer) checksBrowsers(string) bool { return !c.NoProfileDiscovery }

func (c *RepoCapturer) namesProfiles(ws string) bool { return len(c.Profiles[ws]) > 0 }

// profiles resolves the profiles c names for workspace ws in root: each
// relative to root, or an absolute path inside it.
func (c *RepoCapturer) profiles(ws, root string) ([]profile.Profile, error) {
	var named []string
	for _, d := range c.Profiles[ws] {
		if d = filepath.FromSlash(d); !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		named = append(named, d)
	}
	ps, err := checkpoint.ResolveProfiles(root, named)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w (a browser profile named for a workspace is relative to the workspace's root %s, or an absolute path inside it)", ws, err, root)
	}
	return ps, nil
}

// checkProfiles checks the browser profiles the Capturer names for w in
// its files, before the capture quiesces, takes a native checkpoint or
// records anything. When the files cannot be read here, the capture
// itself reports that.
func (l *Lifecycle) checkProfiles(ctx context.Context, w Workspace, p providers.Provider) error {
	pn, ok := l.cfg.Capturer.(profileNamer)
	if !ok || !pn.namesProfiles(w.ID) || !p.Capabilities().Files {
		return nil
	}
	files, err := p.ReadFiles(ctx, w.Instance)
	if err != nil {
		return nil
	}
	defer files.Close()
	_, err = pn.profiles(w.ID, files.Dir())
	return err
}
