package capture

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A file whose ctime is "now" (mtime forged old, as cp -p/tar/npm do) is
// not cached: its last change, the ctime, is inside the racy window.
func TestRacyWindowUsesCtime(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	p := filepath.Join(root, "f")
	if err := os.WriteFile(p, []byte("AAAA"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Unix(500000000, 0)
	_ = os.Chtimes(p, old, old)
	tr := newCapTestRepo(t)
	r := tr.open(t)
	o := capTestOptions(nil)
	o.hooks.settled = false // the real racy window
	// The capture starts, as far as the racy window goes, just after the
	// file's last change, however long opening the repository took.
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	o.hooks.start = time.Unix(st.Ctim.Unix()).Add(10 * time.Millisecond)
	o.Cache = r.FileCache()
	capTestCapture(t, r, root, o)
	n, _ := r.Index().FileCacheCount(capTestWsKey(t, r, o.Workspace))
	fi, _ := os.Stat(p)
	t.Logf("cache entries: %d (file ctime is fresh; mtime %v)", n, fi.ModTime())
	if n != 0 {
		t.Errorf("file with ctime inside the racy window was cached")
	}
}
