package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/bench"
)

// A killed restore's .lifeboat-restore-* staging directory beside the
// target does not stay there for good: a later restore of the target (or
// `lifeboat unlock`) removes it.

// restoreChildEnv carries the arguments of TestLifeboatChild, one a line.
const restoreChildEnv = "LIFEBOAT_TEST_CLI_CHILD_ARGS"

// TestLifeboatChild runs lifeboat in-process with the arguments in
// restoreChildEnv: a real lifeboat process that a test can kill.
func TestLifeboatChild(t *testing.T) {
	env := os.Getenv(restoreChildEnv)
	if env == "" {
		t.Skip("runs only as a lifeboat process started by a test")
	}
	code := run(context.Background(), strings.Split(env, "\n"), strings.NewReader(""), os.Stdout, os.Stderr)
	t.Fatalf("lifeboat ended (exit %d) before it was killed", code)
}

// holdFirstRead holds the first read of path, by any process, for good
// (a fanotify permission event never answered): reached is closed once a
// read started. stop lets it, and any later one, through. It needs
// CAP_SYS_ADMIN; the test is skipped without.
func holdFirstRead(t *testing.T, path string) (reached <-chan struct{}, stop func()) {
	t.Helper()
	f := watchReads(t, path, "a restore's read")
	ch, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var held []int
		defer func() {
			for _, e := range held {
				_ = unix.Close(e)
			}
		}()
		_ = readFanotify(f, func(_ uint64, evfd int) { // a malformed event ends the hold
			if evfd >= 0 {
				if len(held) == 0 {
					close(ch)
				}
				held = append(held, evfd) // never answered
			}
		})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { _ = f.Close(); <-done }) }
	t.Cleanup(stop)
	return ch, stop
}

// killedRestore starts `lifeboat restore` of ws's latest snapshot into
// target as a child process, waits until it reads the data pack (its
// staging directory is then created, locked and holds the snapshot's
// directories), stops it (SIGSTOP, waited for: nothing changes in its
// staging directory any more, and its lock is held), and returns the
// staging directory and a kill function (SIGKILL).
func (e *env) killedRestore(ws, target, pack string) (staging string, kill func()) {
	t := e.t
	t.Helper()
	reached, stop := holdFirstRead(t, pack)
	args := []string{"--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile, "restore", "--workspace", ws, "--target", target, "latest"}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLifeboatChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), restoreChildEnv+"="+strings.Join(args, "\n"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	kill = func() {
		_ = cmd.Process.Kill()
		<-exited
		stop()
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case <-reached:
	case err := <-exited:
		stop()
		t.Fatalf("the restore ended (%v) before it read the data pack", err)
	}
	// Stop every thread: the one held in its read stops as soon as the read
	// is let through, the others at their next return from the kernel.
	must(t, cmd.Process.Signal(unix.SIGSTOP))
	stop()
	var info unix.Siginfo
	must(t, unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil))
	l, _ := filepath.Glob(filepath.Join(filepath.Dir(target), ".lifeboat-restore-*"))
	if len(l) != 1 {
		kill()
		t.Fatalf("staging directories of the running restore: %q", l)
	}
	return l[0], kill
}

// largestFile is the largest regular file under dir.
func largestFile(t *testing.T, dir string) string {
	t.Helper()
	var best string
	var size int64 = -1
	must(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() > size {
			best, size = p, fi.Size()
		}
		return err
	}))
	return best
}

// TestKilledRestoreCleanedCLI: a real `lifeboat restore`, stopped while it
// reads the data (its staging tree holds the snapshot's directories) and
// killed with SIGKILL, leaves its staging directory. While it runs,
// `lifeboat unlock` names it as in use and leaves it exactly as it is.
// Once it is killed, `lifeboat unlock` removes it (it was recorded in the
// cache directory) and says so; a second killed restore's staging is
// removed by the next restore of the same target, which says so and
// restores.
func TestKilledRestoreCleanedCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := e.captureTree("w", "src", 3)
	pack := largestFile(t, filepath.Join(e.repo, "data")) // holds big.bin
	parent := filepath.Join(e.dir, "restores")
	must(t, os.Mkdir(parent, 0o755))
	target := filepath.Join(parent, "work")
	records := filepath.Join(e.cache, "restores")

	staging, kill := e.killedRestore("w", target, pack)
	before := dumpDir(t, staging)
	if recs, _ := os.ReadDir(records); len(recs) != 1 {
		t.Errorf("the running restore's records: %v", recs)
	}
	r := e.ok("unlock")
	if !strings.Contains(r.stderr, "kept "+staging+": in use by a running restore") {
		t.Errorf("unlock during the restore:\n%s", r.stderr)
	}
	if after := dumpDir(t, staging); after != before {
		t.Fatalf("unlock touched the running restore's staging:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	kill()
	r = e.ok("unlock")
	t.Logf("unlock after the kill:\n%s", r.stderr)
	if !strings.Contains(r.stderr, "removed "+staging) {
		t.Errorf("unlock after the kill does not say it removed %s:\n%s", staging, r.stderr)
	}
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Errorf("the killed restore's staging is still there: %v", err)
	}
	if recs, _ := os.ReadDir(records); len(recs) != 0 {
		t.Errorf("records left: %v", recs)
	}

	staging, kill = e.killedRestore("w", target, pack)
	kill()
	r = e.ok("restore", "--workspace", "w", "--target", target, "latest")
	if !strings.Contains(r.stderr, "removed "+staging) {
		t.Errorf("the next restore does not say it removed %s:\n%s", staging, r.stderr)
	}
	if d, err := bench.Compare(src, target); err != nil || len(d) > 0 {
		t.Fatalf("restored tree differs: %v %v", d, err)
	}
	if l, _ := filepath.Glob(filepath.Join(parent, ".lifeboat-*")); len(l) > 0 {
		t.Errorf("left behind: %q", l)
	}
	if recs, _ := os.ReadDir(records); len(recs) != 0 {
		t.Errorf("records left: %v", recs)
	}
	if r := e.ok("unlock"); strings.Contains(r.stderr, ".lifeboat-") {
		t.Errorf("unlock with nothing left over:\n%s", r.stderr)
	}
}
