package boxfiles

import (
	"strings"
	"testing"
)

// TestParseListing: find's records are read, and a listing naming a path
// outside the workspace (a hostile sandbox) is refused.
func TestParseListing(t *testing.T) {
	now, es, err := parseListing([]byte("now 1700000000\x00f 5 1699990000.1234567890 4755 66:12 2 a b/c d\x00d 4096 1699990001 755 66:13 3 a b\x00"))
	if err != nil || now.Unix() != 1700000000 || len(es) != 2 {
		t.Fatalf("parseListing = %v, %+v, %v", now, es, err)
	}
	if e := es[0]; e.rel != "a b/c d" || e.size != 5 || e.mtime.UnixNano() != 1699990000123456789 || e.perm.String() != "urwxr-xr-x" || e.nlink != 2 {
		t.Fatalf("first record: %+v (%s)", e, e.perm)
	}
	for _, bad := range []string{"f 1 1.0 644 1:1 1 ../escape", "f 1 1.0 644 1:1 1 /etc/passwd", "f 1 x 644 1:1 1 a", "garbage"} {
		if _, _, err := parseListing([]byte("now 1\x00" + bad + "\x00")); err == nil {
			t.Fatalf("parseListing accepted %q", bad)
		}
	}
	if _, _, err := parseListing([]byte("f 1 1.0 644 1:1 1 a\x00")); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("a listing without its clock: %v", err)
	}
}

// TestCheckWorkspace: a workspace whose last name starts with "-" is
// refused (the sandbox's find, tar and mv would read it as an option:
// "-delete" would make find delete its working directory's tree).
func TestCheckWorkspace(t *testing.T) {
	for w, ok := range map[string]bool{"/home/user/workspace": true, "/a/b-c": true, "/home/-x/w": true,
		"/": false, "rel": false, "/home/user/-delete": false, "/-w": false, "/home/user/-w/": false} {
		if err := CheckWorkspace(w); (err == nil) != ok {
			t.Errorf("CheckWorkspace(%q) = %v", w, err)
		}
	}
}
