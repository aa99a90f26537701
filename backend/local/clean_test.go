package local

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestCleanTemp(t *testing.T) {
	t.Parallel()
	b := newRepo(t)
	tmp := filepath.Join(b.dir, tmpDir)
	old := time.Now().Add(-2 * time.Hour)
	mk := func(name string, age time.Time) {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, age, age); err != nil {
			t.Fatal(err)
		}
	}
	mk(tempPrefix+"stale", old)
	mk(tempPrefix+"fresh", time.Now())
	mk("notours", old)
	// A live writer in "another process": an old file it still holds locked.
	live, err := osCreateTemp(tmp, tempPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := os.Chtimes(live.Name(), old, old); err != nil {
		t.Fatal(err)
	}

	n, err := b.CleanTemp(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Base(live.Name()), tempPrefix + "fresh", "notours"}
	if !haveFlock {
		want = want[1:]
	}
	got := tmpEntries(t, b)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || n != 1 {
		t.Errorf("after CleanTemp: removed %d, left %v; want removed 1, left %v", n, got, want)
	}
}
