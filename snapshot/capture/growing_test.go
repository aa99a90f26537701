package capture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/internal/busywriter"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// A log appended to without pause while the capture reads it changes
// during every read. The capture is complete all the same: the snapshot
// holds the log's first bytes, exactly as the file has them, and the
// manifest lists the log as a prefix. Every other file is exact.
// The writer is made to append during each read: a read ends (afterRead)
// only once a line was appended after it began (beforeRead).
func TestCaptureAppendedLogIsPrefix(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var log strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&log, "old line %05d\n", i)
	}
	capTestWrite(t, root, map[string]string{"agent.log": log.String(), "src/main.go": "package main\n", "notes": "quiet"})
	r := capTestOpenRepo(t)
	o := capTestOptions(nil)
	o.Cache = r.FileCache()
	a := busywriter.Append(t, filepath.Join(root, "agent.log"))
	var started [4]int64
	reads := 0
	o.hooks.beforeRead = func(p string, attempt int) {
		if p == "agent.log" {
			started[attempt] = a.Steps()
		}
	}
	o.hooks.afterRead = func(p string, attempt int) {
		if p == "agent.log" {
			reads = attempt
			a.WaitPast(started[attempt])
		}
	}
	m := capTestCapture(t, r, root, o)
	a.Halt()
	final, err := os.ReadFile(filepath.Join(root, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}

	if !m.Complete || len(m.Errors) != 0 {
		t.Fatalf("complete %v, errors %q", m.Complete, capTestErrors(m))
	}
	if reads != 2 {
		t.Errorf("the log was read %d times, want 2 (then checked)", reads)
	}
	if len(m.Prefixes) != 1 || m.Prefixes[0].Path != "agent.log" || m.PrefixesNotListed != 0 {
		t.Fatalf("prefixes %+v (+%d)", m.Prefixes, m.PrefixesNotListed)
	}
	pre := m.Prefixes[0]
	got := capTestFlatten(t, r, m.Root.Subtree)
	content := capTestContent(t, r, got["agent.log"])
	if uint64(len(content)) != pre.Size || got["agent.log"].Size != pre.Size || pre.Size > pre.FileSize ||
		pre.FileSize > uint64(len(final)) || pre.Size <= uint64(log.Len()) {
		t.Fatalf("captured %d bytes, node size %d, prefix %+v; the log had %d bytes before, %d at the end",
			len(content), got["agent.log"].Size, pre, log.Len(), len(final))
	}
	if !bytes.Equal(content, final[:len(content)]) {
		t.Fatal("the captured log is not the first bytes of the log")
	}
	// The manifest as stored says the same.
	stored, err := snapshot.LoadManifest(context.Background(), r, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Prefixes) != 1 || stored.Prefixes[0] != pre || !stored.Complete {
		t.Errorf("stored manifest: prefixes %+v, complete %v", stored.Prefixes, stored.Complete)
	}
	capTestCompare(t, r, root, m, "agent.log")
	// A file captured as a prefix is not remembered as unchanged: the
	// next capture (the writer stopped) reads it again and is exact.
	o.hooks.beforeRead, o.hooks.afterRead = nil, nil
	m2 := capTestCapture(t, r, root, o)
	if !m2.Complete || len(m2.Prefixes) != 0 {
		t.Fatalf("second capture: complete %v, prefixes %+v", m2.Complete, m2.Prefixes)
	}
	capTestCompare(t, r, root, m2)
	snaptest.Check(t, r)
}

// A file that changed during both reads in any way but by appending is
// recorded as today: an error ("changed while being read"), the snapshot
// partial, holding the second read, and no prefix claimed. The control row
// only appends and is a prefix. Each change sets the mtime to a new value
// so that a stat sees it whatever the clock's granularity (a rewrite that
// keeps the size and mtime is not seen by any stat).
func TestCaptureRewrittenWhileReadIsNotPrefix(t *testing.T) {
	t.Parallel()
	base := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, f *os.File, round int)
		prefix bool
	}{
		{"appended", func(t *testing.T, f *os.File, round int) {
			_, err := f.WriteAt([]byte(fmt.Sprintf("appended %d\n", round)), capTestSize(t, f))
			capTestMust(t, err)
		}, true},
		{"rewritten in the middle", func(t *testing.T, f *os.File, round int) {
			_, err := f.WriteAt([]byte(fmt.Sprintf("REWRITTEN %d", round)), int64(len(base)/2))
			capTestMust(t, err)
		}, false},
		{"rewritten in the middle and appended", func(t *testing.T, f *os.File, round int) {
			_, err := f.WriteAt([]byte(fmt.Sprintf("REWRITTEN %d", round)), int64(len(base)/2))
			capTestMust(t, err)
			_, err = f.WriteAt([]byte("and more\n"), capTestSize(t, f))
			capTestMust(t, err)
		}, false},
		{"truncated and written longer", func(t *testing.T, f *os.File, round int) {
			capTestMust(t, f.Truncate(0))
			_, err := f.WriteAt([]byte(strings.Repeat(fmt.Sprintf("new %d ", round), 20000)), 0)
			capTestMust(t, err)
		}, false},
		{"truncated shorter", func(t *testing.T, f *os.File, round int) {
			capTestMust(t, f.Truncate(capTestSize(t, f)-int64(1000*round)))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			capTestWrite(t, root, map[string]string{"f": base, "quiet": "q"})
			path := filepath.Join(root, "f")
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			capTestMust(t, err)
			defer f.Close()
			r := capTestOpenRepo(t)
			o := capTestOptions(nil)
			var secondRead []byte
			mtime := time.Unix(1600000000, 0)
			o.hooks.beforeRead = func(p string, attempt int) {
				if p == "f" && attempt == 2 {
					secondRead, err = os.ReadFile(path)
					capTestMust(t, err)
				}
			}
			o.hooks.afterRead = func(p string, attempt int) {
				if p != "f" {
					return
				}
				tc.change(t, f, attempt)
				mtime = mtime.Add(time.Second)
				capTestMust(t, os.Chtimes(path, mtime, mtime))
			}
			m := capTestCapture(t, r, root, o)
			final, err := os.ReadFile(path)
			capTestMust(t, err)
			content := capTestContent(t, r, capTestFlatten(t, r, m.Root.Subtree)["f"])
			errs := capTestErrors(m)
			if tc.prefix {
				if !m.Complete || len(errs) != 0 || len(m.Prefixes) != 1 ||
					m.Prefixes[0] != (snapshot.CapturePrefix{Path: "f", Size: uint64(len(secondRead)), FileSize: uint64(len(final))}) {
					t.Fatalf("complete %v, errors %q, prefixes %+v", m.Complete, errs, m.Prefixes)
				}
			} else if m.Complete || len(m.Prefixes) != 0 || len(errs) != 1 ||
				errs["f"] != "changed while being read; the snapshot holds its second read" {
				t.Fatalf("complete %v, errors %q, prefixes %+v", m.Complete, errs, m.Prefixes)
			}
			if !bytes.Equal(content, secondRead) {
				t.Errorf("captured %d bytes, not the second read's %d", len(content), len(secondRead))
			}
			snaptest.Check(t, r)
		})
	}
}

func capTestMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func capTestSize(t *testing.T, f *os.File) int64 {
	t.Helper()
	st, err := f.Stat()
	capTestMust(t, err)
	return st.Size()
}

// Inside a browser profile (the sensitive tree) no prefix is kept: its
// part has no list to say so, and a profile is captured with its browser
// stopped. A profile file appended to during both reads is an error of
// the tree, as before, and the snapshot is partial.
func TestCaptureSensitiveGrowingIsNotPrefix(t *testing.T) {
	t.Parallel()
	r := capTestOpenRepo(t)
	src := sensTestTree(t)
	o := sensTestOptions()
	o.hooks.afterRead = func(p string, attempt int) {
		if p != "Cookies" {
			return
		}
		f, err := os.OpenFile(filepath.Join(src, "home/.cfg/prof/Cookies"), os.O_APPEND|os.O_WRONLY, 0)
		capTestMust(t, err)
		_, err = f.WriteString("more")
		capTestMust(t, err)
		capTestMust(t, f.Close())
	}
	m := capTestCapture(t, r, src, o)
	if m.Complete || len(m.Prefixes) != 0 {
		t.Fatalf("complete %v, prefixes %+v", m.Complete, m.Prefixes)
	}
	part, err := snapshot.LoadSensitivePart(context.Background(), r, m)
	capTestMust(t, err)
	if len(part.Trees) != 1 || part.Trees[0].Complete || len(part.Trees[0].Errors) != 1 ||
		part.Trees[0].Errors[0] != (snapshot.CaptureError{Path: "Cookies", Error: "changed while being read; the snapshot holds its second read"}) {
		t.Fatalf("sensitive trees %+v", part.Trees)
	}
}

// A file that a writer appends to faster than the capture reads it is
// read up to the size it had when the read passed the size known before
// the read, and no further: the read ends. Here every read of 4 bytes is
// followed by an append of 8.
func TestCapFileReaderGrowingEnds(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "f")
	capTestMust(t, os.WriteFile(p, []byte("0123456789"), 0o644))
	w, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	capTestMust(t, err)
	defer w.Close()
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	capTestMust(t, err)
	defer unix.Close(fd)
	rd := &capFileReader{fd: fd, size: 10}
	var got []byte
	buf := make([]byte, 4)
	for reads := 0; ; reads++ {
		if reads > 100 {
			t.Fatalf("still reading after %d reads (%d bytes)", reads, len(got))
		}
		n, err := rd.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
		_, err = w.WriteString("abcdefgh")
		capTestMust(t, err)
	}
	// Reads of 4, 8, then 12 > 10: the file had 10+2*8 bytes then.
	data, err := os.ReadFile(p)
	capTestMust(t, err)
	if len(got) != 26 || !bytes.Equal(got, data[:26]) {
		t.Fatalf("read %d bytes %q, want the file's first 26", len(got), got)
	}
}

// At most 1000 prefixes are listed, sorted by path; the others are
// counted.
func TestCapturePrefixesListed(t *testing.T) {
	t.Parallel()
	c := &capturer{}
	for i := range 1003 {
		c.prefix(fmt.Sprintf("f%04d", 1003-i), 1, 2)
	}
	got, more := c.listedPrefixes()
	if len(got) != maxCaptureErrors || more != 3 {
		t.Fatalf("%d listed, %d more", len(got), more)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Path >= got[i].Path {
			t.Fatalf("not sorted at %d: %s, %s", i, got[i-1].Path, got[i].Path)
		}
	}
}
