package ssh

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	got := map[string]string{}
	in := "2049:12 a\x002049:12 dir/new\nline\x00\x00# file: ."
	r := bufio.NewReader(strings.NewReader(in))
	if err := parseFind(r, got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["a"] != "2049:12" || got["dir/new\nline"] != "2049:12" {
		t.Fatalf("parseFind = %q", got)
	}
	if rest, _ := r.ReadString(0); rest != "# file: ." {
		t.Fatalf("parseFind read past its end marker: left %q", rest)
	}
	for _, bad := range []string{"no-end\x00", "nospace\x00\x00"} {
		if err := parseFind(bufio.NewReader(strings.NewReader(bad)), map[string]string{}); err == nil {
			t.Fatalf("parseFind(%q) accepted it", bad)
		}
	}
}

// FuzzParseHostMeta: whatever a host prints, parsing never panics and
// never yields an empty path.
func FuzzParseHostMeta(f *testing.F) {
	f.Add([]byte("1:2 a\x00\x00# file: a\\012b\nuser.x=0sAP8=\nuser.y\n\n"))
	f.Add([]byte("\x00# file: .\nuser.q=\"a\\134b\"\nuser.h=0xff00\n"))
	f.Add([]byte("\x00user.x=0s\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		groups, xs := map[string]string{}, map[string][]fsmeta.Xattr{}
		r := bufio.NewReader(bytes.NewReader(b))
		if parseFind(r, groups) != nil {
			return
		}
		_ = parseGetfattr(r, xs)
		for p := range groups {
			if p == "" {
				t.Fatal("empty path from find")
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
