package boxfiles

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"path"

	"lifeboat/providers"
)

// Box is a platform's data plane for one adapter. Every error is a
// *providers.Error; a sandbox the platform does not find is KindConflict.
type Box interface {
	// Upload writes size bytes of r to the absolute path p in instance id
	// (its directory exists).
	Upload(ctx context.Context, id providers.InstanceID, p string, r io.Reader, size int64) error
	// Download copies the file at the absolute path p in instance id to w.
	Download(ctx context.Context, id providers.InstanceID, p string, w io.Writer) error
	// Run runs argv in instance id with the absolute directory dir as its
	// working directory and returns its exit code and output (each bounded
	// by the adapter).
	Run(ctx context.Context, id providers.InstanceID, dir string, argv []string) (providers.ExecResult, error)
}

// Layout is where things are in an instance.
type Layout struct {
	Workspace string // W, absolute, not "/"
}

// Parent is dir(W): the working directory of Lifeboat's commands.
func (l Layout) Parent() string { return path.Dir(l.Workspace) }

// Base is base(W).
func (l Layout) Base() string { return path.Base(l.Workspace) }

// Area is Lifeboat's directory, relative to Parent.
func (l Layout) Area() string { return ".lifeboat-" + l.Base() }

// Staging is the absolute path of the staging tree named n.
func (l Layout) Staging(n string) string { return path.Join(l.Parent(), l.Area(), "staging", n) }

// TmpName is a fresh name for a file in transit.
func TmpName(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
