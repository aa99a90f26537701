package ssh

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers/fsmeta"
	"lifeboat/providers/providertest"
)

// TestParseGetfattrRealOutput: names with newlines, backslashes, spaces,
// '=' and non-UTF-8 bytes, binary and empty values, as the installed
// getfattr prints them, parse back to what the filesystem holds.
func TestParseGetfattrRealOutput(t *testing.T) {
	if _, err := exec.LookPath("getfattr"); err != nil {
		t.Skip("getfattr not installed (apt-get install attr)")
	}
	dir := t.TempDir()
	if !providertest.UserXattrs(t, dir) {
		t.Skip("no user xattrs under the temporary directory")
	}
	names := []string{"plain", "new\nline", `back\slash`, "sp ace", "eq=ual", "bin\xff\x01", "dir/inner"}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string][]fsmeta.Xattr{}
	for i, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		xs := []fsmeta.Xattr{{Name: "user.a", Value: []byte(fmt.Sprintf("v%d\x00\xff\n", i))}, {Name: "user.empty", Value: nil}}
		for _, x := range xs {
			if err := unix.Setxattr(p, x.Name, x.Value, 0); err != nil {
				t.Fatal(err)
			}
		}
		want[n] = xs
	}
	if err := unix.Setxattr(dir, "user.root", []byte("r"), 0); err != nil {
		t.Fatal(err)
	}
	want["."] = []fsmeta.Xattr{{Name: "user.root", Value: []byte("r")}}
	cmd := exec.Command("getfattr", "-R", "-P", "-h", "-d", "-m", `^user\.`, "-e", "base64", "--", ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]fsmeta.Xattr{}
	if err := parseGetfattr(bufio.NewReader(bytes.NewReader(out)), got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("parsed:\n%q\nwant:\n%q\nfrom:\n%s", got, want, out)
	}
}

func TestParseFind(t *testing.T) {
	entries, groups := map[string]hostEntry{}, map[string]string{}
	in := "d 3 4096 2049:2 1614834367.1234567890 \x00" +
		"f 2 5 2049:12 1614834367.0000000010 a\x00" +
		"f 2 5 2049:12 1614834367.0000000010 dir/new\nline\x00" +
		"l 1 3 2049:13 -1.9000000000 sp ace \x00" +
		"f 1 0 2049:14 7 single\x00" +
		"\x00# file: ."
	r := bufio.NewReader(strings.NewReader(in))
	if err := parseFind(r, entries, groups); err != nil {
		t.Fatal(err)
	}
	want := map[string]hostEntry{
		".":             {'d', 4096, time.Unix(1614834367, 123456789)},
		"a":             {'f', 5, time.Unix(1614834367, 1)},
		"dir/new\nline": {'f', 5, time.Unix(1614834367, 1)},
		"sp ace ":       {'l', 3, time.Unix(-1, 900000000)},
		"single":        {'f', 0, time.Unix(7, 0)},
	}
	if fmt.Sprint(entries) != fmt.Sprint(want) {
		t.Fatalf("parseFind entries = %v, want %v", entries, want)
	}
	if len(groups) != 2 || groups["a"] != "2049:12" || groups["dir/new\nline"] != "2049:12" {
		t.Fatalf("parseFind groups = %q", groups)
	}
	if rest, _ := r.ReadString(0); rest != "# file: ." {
		t.Fatalf("parseFind read past its end marker: left %q", rest)
	}
	for _, bad := range []string{
		"no-end\x00",
		"f 1 0 1:2 7\x00\x00",              // no path field
		"f x 0 1:2 7 a\x00\x00",            // link count
		"f 1 -x 1:2 7 a\x00\x00",           // size
		"f 1 0 12 7 a\x00\x00",             // inode without dev
		"f 1 0 1:2 7.x a\x00\x00",          // mtime
		"f 1 0 1:2 1.0000000001 a\x00\x00", // finer than a nanosecond
		"ff 1 0 1:2 7 a\x00\x00",           // type
	} {
		if err := parseFind(bufio.NewReader(strings.NewReader(bad)), map[string]hostEntry{}, map[string]string{}); err == nil {
			t.Fatalf("parseFind(%q) accepted it", bad)
		}
	}
}

func TestParseFindTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"0":                              time.Unix(0, 0),
		"7":                              time.Unix(7, 0),
		"5.5":                            time.Unix(5, 500000000),
		"1614834367.1234567890":          time.Unix(1614834367, 123456789),
		"1614834367.123456789":           time.Unix(1614834367, 123456789),
		"1614834367.0000000010":          time.Unix(1614834367, 1),
		"1614834367.9999999990":          time.Unix(1614834367, 999999999),
		"-1.9000000000":                  time.Unix(-1, 900000000), // tv_sec -1, tv_nsec .9: 1969-12-31 23:59:59.9
		"-310157633.5000000000":          time.Unix(-310157633, 500000000),
		"9223372036854775807.9999999990": time.Unix(1<<63-1, 999999999),
	} {
		got, err := parseFindTime(in)
		if err != nil || !got.Equal(want) || got.Nanosecond() != want.Nanosecond() {
			t.Errorf("parseFindTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-", ".5", "1.", "1.2.3", "+1", "1e9", " 1", "1 ", "1.12345678901", "1.-5", "99999999999999999999"} {
		if got, err := parseFindTime(bad); err == nil {
			t.Errorf("parseFindTime(%q) = %v, want an error", bad, got)
		}
	}
}

// FuzzParseHostMeta: whatever a host prints, parsing never panics, never
// yields an empty path, and links only paths find listed as files.
func FuzzParseHostMeta(f *testing.F) {
	f.Add([]byte("d 2 4096 1:1 1.5 \x00f 2 1 1:2 1614834367.1234567890 a\x00\x00# file: a\\012b\nuser.x=0sAP8=\nuser.y\n\n"))
	f.Add([]byte("l 1 3 1:3 -1.9000000000 x y\x00\x00# file: .\nuser.q=\"a\\134b\"\nuser.h=0xff00\n"))
	f.Add([]byte("\x00user.x=0s\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, groups, xs := map[string]hostEntry{}, map[string]string{}, map[string][]fsmeta.Xattr{}
		r := bufio.NewReader(bytes.NewReader(b))
		if parseFind(r, entries, groups) != nil {
			return
		}
		_ = parseGetfattr(r, xs)
		for p, e := range entries {
			if p == "" {
				t.Fatal("empty path from find")
			}
			back, err := parseFindTime(strconv.FormatInt(e.mtime.Unix(), 10) + "." + fmt.Sprintf("%09d0", e.mtime.Nanosecond()))
			if err != nil || !back.Equal(e.mtime) {
				t.Fatalf("mtime %v of %q printed as find does parses as %v, %v", e.mtime, p, back, err)
			}
		}
		for p := range groups {
			if entries[p].typ != 'f' {
				t.Fatalf("%q linked but not a file", p)
			}
		}
		for p := range xs {
			if p == "" {
				t.Fatal("empty path from getfattr")
			}
		}
	})
}

func TestDeniedPath(t *testing.T) {
	for in, want := range map[string]string{
		"tar: a/b c: Cannot open: Permission denied\ntar: Exiting with failure status due to previous errors\n": "a/b c",
		"tar: x: Cannot change ownership to uid 4242, gid 4243: Operation not permitted\n":                      "x",
		"getfattr: ./secret/key: Permission denied\n":                                                           "secret/key",
		"find: './locked': Permission denied\n":                                                                 "locked",
		"tar: Unexpected EOF in archive\n":                                                                      "",
	} {
		if got := deniedPath(in); got != want {
			t.Errorf("deniedPath(%q) = %q, want %q", in, got, want)
		}
	}
}
