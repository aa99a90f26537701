package capture

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"lifeboat/internal/proctest"
	"lifeboat/internal/seedtest"
	"lifeboat/internal/storetest"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// A capture killed with SIGKILL at chosen points (while reading the Nth
// file, or after the walk) leaves a repository that checks clean with
// --read-data, in which the earlier snapshot is intact and no manifest of
// the killed capture exists; capturing again then works.

const capKillEnv = "LIFEBOAT_CAPTURE_KILL_CHILD"

func TestCaptureKilled(t *testing.T) { storetest.Each(t, testCaptureKilled) }

func testCaptureKilled(t *testing.T, s storetest.Store) {
	rng := seedtest.Rand(t)
	root := t.TempDir()
	files := map[string]string{}
	for i := range 40 {
		b := make([]byte, 20<<10+rng.IntN(200<<10))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		files[filepath.Join("d"+strconv.Itoa(i%4), "f"+strconv.Itoa(i))] = string(b)
	}
	capTestWrite(t, root, files)
	tr := newCapTestRepoIn(t, s)
	r := tr.open(t)
	o := capTestOptions(nil)
	o.Cache = r.FileCache()
	first := capTestCapture(t, r, root, o)
	want := capTestFlatten(t, r, first.Root.Subtree)
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Change the tree so the killed captures have new data to store.
	for p, c := range files {
		if rng.IntN(2) == 0 {
			capTestWrite(t, root, map[string]string{p: c + "changed"})
		}
	}

	points := []string{"walked", "flushed"}
	for _, n := range rng.Perm(len(files))[:4] {
		points = append(points, "open "+strconv.Itoa(n+1))
	}
	for _, point := range points {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCaptureKilledChild$")
		cmd.Env = append(append(os.Environ(), s.Env()...), capKillEnv+"="+strings.Join([]string{tr.dir, tr.cache, root, point}, "\n"))
		out := proctest.StartChild(t, cmd)
		killed := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == point {
				_ = cmd.Process.Kill()
				killed = true
				break
			}
		}
		err := cmd.Wait()
		if !killed {
			t.Fatalf("child never reached %q: %v", point, err)
		}
		t.Logf("killed at %q", point)

		r := tr.open(t)
		snaptest.Check(t, r)
		snaps, _, err := snapshot.List(context.Background(), r, "")
		if err != nil || len(snaps) != 1 || snaps[0].ID != first.ID {
			t.Fatalf("after the kill: %d snapshots (%v), want only the first", len(snaps), err)
		}
		got := capTestFlatten(t, r, first.Root.Subtree)
		for p, w := range want {
			g := got[p]
			if g == nil || g.Type != w.Type || (g.Type == snapshot.TypeFile && string(capTestContent(t, r, g)) != files[p]) {
				t.Fatalf("after the kill, %s of the first snapshot differs", p)
			}
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r = tr.open(t)
	o.Cache = r.FileCache()
	m := capTestCapture(t, r, root, o)
	if !m.Complete {
		t.Fatal(m.Errors)
	}
	capTestCompare(t, r, root, m)
	snaptest.Check(t, r)
}

// TestCaptureKilledChild is the child of TestCaptureKilled: it captures
// until it reaches the kill point, says so and waits there to be killed.
func TestCaptureKilledChild(t *testing.T) {
	t.Parallel()
	parts := strings.Split(proctest.ChildEnv(t, capKillEnv, "TestCaptureKilled"), "\n")
	tr := &capTestRepo{dir: parts[0], cache: parts[1], store: storetest.At(parts[0])}
	root, point := parts[2], parts[3]
	r := tr.open(t)
	o := capTestOptions(nil) // no file cache: every file is opened
	o.Readers = 1
	at := func(p string) {
		if p == point {
			fmt.Println(p)
			select {} // killed here
		}
	}
	n := 0 // one reader
	o.hooks.beforeOpen = func(string) { n++; at("open " + strconv.Itoa(n)) }
	o.hooks.walked = func() { at("walked") }
	o.hooks.flushed = func() { at("flushed") }
	m, err := Run(context.Background(), r, root, o)
	t.Fatalf("capture ended (%v, %v) without reaching %q", m, err, point)
}
