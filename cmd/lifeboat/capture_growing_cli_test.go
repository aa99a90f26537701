package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/internal/busywriter"
)

// holdReads holds every read of path, by any thread of any process, until
// fn returns (a fanotify permission event): a read the capture makes of
// the file cannot end before fn has seen it start. It needs
// CAP_SYS_ADMIN; the test is skipped without. The returned func stops it.
func holdReads(t *testing.T, path string, fn func()) (stop func()) {
	t.Helper()
	f := watchReads(t, path, "the capture's reads")
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := readFanotify(f, func(mask uint64, evfd int) {
			if mask&unix.FAN_ACCESS_PERM != 0 {
				fn()
				resp := make([]byte, 8) // unix.FanotifyResponse: fd, response
				binary.NativeEndian.PutUint32(resp[0:], uint32(evfd))
				binary.NativeEndian.PutUint32(resp[4:], unix.FAN_ALLOW)
				if _, err := f.Write(resp); err != nil {
					t.Error(err)
				}
			}
			if evfd >= 0 {
				_ = unix.Close(evfd)
			}
		})
		if err != nil {
			t.Error(err)
		}
	}()
	var once atomic.Bool
	stop = func() {
		if once.CompareAndSwap(false, true) {
			_ = f.Close()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// An agent appends to its log without pause while `lifeboat capture`
// runs: the capture exits 0 with a complete snapshot, the summary names
// the log as captured as a prefix (JSON and text), and the restored log
// is exactly the first bytes of the log as it ends. Every read the
// capture makes of the log is held until the writer has appended a line
// after it began, so each read sees the log grow.
func TestCaptureGrowingLogCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	work := filepath.Join(e.dir, "work")
	log := filepath.Join(work, "agent.log")
	must(t, os.MkdirAll(filepath.Join(work, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(work, "src", "main.go"), []byte("package main\n"), 0o644))
	must(t, os.WriteFile(log, bytes.Repeat([]byte("an old line of the agent's log\n"), 20000), 0o644))
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	w := busywriter.Start(t, func(i int) error {
		_, err := fmt.Fprintf(f, "step %07d: the agent did something\n", i)
		return err
	})
	stop := holdReads(t, log, w.WaitStep)
	sum := e.capture("w", work)
	stop()
	w.Halt()
	final, err := os.ReadFile(log)
	must(t, err)

	if sum["complete"] != true || sum["errors"] != float64(0) {
		t.Fatalf("summary %v", sum)
	}
	pre, _ := sum["prefixes"].([]any)
	if len(pre) != 1 || sum["prefixes_not_listed"] != float64(0) {
		t.Fatalf("summary prefixes %v", sum["prefixes"])
	}
	p := pre[0].(map[string]any)
	size, fileSize := int(p["size"].(float64)), int(p["file_size"].(float64))
	if p["path"] != "agent.log" || size > fileSize || fileSize > len(final) || size <= 20000*31 {
		t.Fatalf("prefix %v; the log had %d bytes before, %d at the end", p, 20000*31, len(final))
	}

	target := filepath.Join(e.dir, "restored")
	e.ok("restore", "--workspace", "w", "--target", target, "latest")
	got, err := os.ReadFile(filepath.Join(target, "agent.log"))
	must(t, err)
	if len(got) != size || !bytes.Equal(got, final[:size]) {
		t.Fatalf("restored log of %d bytes is not the first %d bytes of the final log (%d)", len(got), size, len(final))
	}
	if b, err := os.ReadFile(filepath.Join(target, "src", "main.go")); err != nil || string(b) != "package main\n" {
		t.Fatalf("src/main.go restored as %q, %v", b, err)
	}

	// ls and snapshots show which file is not exact (JSON and text).
	var marked int
	for _, n := range jsonLines(t, e.ok("ls", "--json", "--workspace", "w", "latest").stdout) {
		if n["path"] == "agent.log" {
			marked++
			if n["size"] != float64(size) || n["prefix_of"] != float64(fileSize) {
				t.Errorf("ls --json: agent.log %v, want size %d prefix_of %d", n, size, fileSize)
			}
		} else if _, ok := n["prefix_of"]; ok {
			t.Errorf("ls --json marks %v", n)
		}
	}
	if marked != 1 {
		t.Errorf("ls --json listed agent.log %d times", marked)
	}
	if out := e.ok("ls", "--workspace", "w", "latest").stdout; !strings.Contains(out,
		fmt.Sprintf("agent.log  (kept growing while captured: its first %d of %d bytes, verified)\n", size, fileSize)) ||
		strings.Count(out, "kept growing") != 1 {
		t.Errorf("ls:\n%s", out)
	}
	snaps := jsonLines(t, e.ok("snapshots", "--json").stdout)
	sp, _ := last(snaps)["prefixes"].([]any)
	if len(snaps) != 1 || len(sp) != 1 || sp[0].(map[string]any)["path"] != "agent.log" || sp[0].(map[string]any)["file_size"] != float64(fileSize) ||
		last(snaps)["prefixes_not_listed"] != float64(0) {
		t.Errorf("snapshots --json: %v", snaps)
	}
	if out := e.ok("snapshots").stdout; !strings.Contains(out, "complete, 1 file a verified prefix") {
		t.Errorf("snapshots:\n%s", out)
	}

	// The text summary says it too (a second capture, the log growing again).
	w2 := busywriter.Start(t, func(i int) error {
		_, err := fmt.Fprintf(f, "later step %07d\n", i)
		return err
	})
	stop = holdReads(t, log, w2.WaitStep)
	out := e.ok("capture", "--workspace", "w", work).stdout
	stop()
	w2.Halt()
	if !strings.Contains(out, "agent.log kept growing while it was read: captured as its first ") || strings.Contains(out, "partial") {
		t.Fatalf("text summary:\n%s", out)
	}
	e.ok("check", "--read-data")
}

// A file rewritten in the middle during every read is not taken for a
// prefix: the capture is partial (exit 3), the file is named among the
// errors and in no prefix list.
func TestCaptureRewrittenFileCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	work := filepath.Join(e.dir, "work")
	data := filepath.Join(work, "data.bin")
	must(t, os.MkdirAll(work, 0o755))
	must(t, os.WriteFile(data, bytes.Repeat([]byte("0123456789abcdef"), 1<<16), 0o644))
	f, err := os.OpenFile(data, os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	mtime := time.Unix(1600000000, 0)
	w := busywriter.Start(t, func(i int) error {
		if _, err := f.WriteAt([]byte(fmt.Sprintf("REWRITE %09d", i)), 1<<19); err != nil {
			return err
		}
		// A new mtime each time, so a stat sees the rewrite whatever the
		// clock's granularity.
		return os.Chtimes(data, mtime, mtime.Add(time.Duration(i)*time.Second))
	})
	stop := holdReads(t, data, w.WaitStep)
	res := e.run("capture", "--workspace", "w", "--json", work)
	stop()
	w.Halt()
	if res.code != 3 {
		t.Fatalf("exit %d, want 3\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var sum map[string]any
	errLines := 0
	for _, m := range jsonLines(t, res.stdout) {
		switch m["message_type"] {
		case "summary":
			sum = m
		case "error":
			errLines++
			if m["path"] != "data.bin" || !strings.Contains(m["error"].(string), "changed while being read") {
				t.Errorf("error line %v", m)
			}
		}
	}
	if errLines != 1 || sum == nil || sum["complete"] != false || sum["errors"] != float64(1) || len(sum["prefixes"].([]any)) != 0 {
		t.Fatalf("summary %v", sum)
	}
}
