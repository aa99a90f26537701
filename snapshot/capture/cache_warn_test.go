package capture

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lifeboat/repo"
)

// failingCache is a file cache whose every call fails.
type failingCache struct{ FileCache }

var errCacheDown = errors.New("file cache down")

func (failingCache) FileCacheGen() (uint64, error) { return 0, errCacheDown }

// A file cache that fails costs reads, not the capture: the capture
// completes, and says so through the warning function of its context
// (repo.WithWarn), never on its own.
func TestFailingFileCacheWarns(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	capTestWrite(t, root, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	r := newCapTestRepo(t).open(t)
	var mu sync.Mutex
	var warnings []string
	ctx := repo.WithWarn(context.Background(), func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, msg)
	})
	var read atomic.Int64
	o := capTestOptions(&read)
	o.Cache = failingCache{r.FileCache()}
	m, err := Run(ctx, r, root, o)
	if err != nil || !m.Complete || m.Totals.Files != 2 {
		t.Fatalf("capture with a failing file cache: %+v, %v", m, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "the file cache failed; every file is read: file cache down") {
		t.Fatalf("warnings: %q", warnings)
	}
}
