package repo

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"lifeboat/backend"
)

// Only a missing config means "no repository": a refused one is
// ErrAccessDenied naming the path and what to do, and any other failure
// stays itself.
func TestOpenConfigErrors(t *testing.T) {
	tr := newTestRepo(t)
	open := func(err error) error {
		_, oerr := Open(t.Context(), loadFails{tr.be, backend.Config, err}, testPassword, Options{CacheDir: tr.cache})
		return oerr
	}
	denied := open(&fs.PathError{Op: "open", Path: tr.dir + "/config", Err: syscall.EACCES})
	if !errors.Is(denied, ErrAccessDenied) || errors.Is(denied, ErrNoRepository) || !strings.Contains(denied.Error(), tr.dir+"/config") ||
		!strings.Contains(denied.Error(), "run lifeboat as a user that may read the repository") {
		t.Errorf("refused config: %v", denied)
	}
	if err := open(backend.ErrNotFound); !errors.Is(err, ErrNoRepository) {
		t.Errorf("missing config: %v", err)
	}
	io := open(syscall.EIO)
	if !errors.Is(io, syscall.EIO) || errors.Is(io, ErrNoRepository) || errors.Is(io, ErrAccessDenied) {
		t.Errorf("I/O error: %v", io)
	}
	if err := open(context.Canceled); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoRepository) {
		t.Errorf("cancelled: %v", err)
	}
}
