package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lifeboat/bench"
	"lifeboat/internal/s3test"
)

// manifestGet matches the path of a GET of one snapshot object.
var manifestGet = regexp.MustCompile(`/snapshots/[0-9a-f]{64}$`)

// TestSnapshotCatalogSavesRequests drives the binary on an S3 repository
// (versitygw behind a counting proxy) that holds two workspaces'
// snapshots. Once the cache directory's snapshot catalog knows them,
// `restore latest` and a capture's search for its parent fetch only the
// newest manifest of the workspace, and `forget --workspace` only that
// workspace's; with a new cache directory every manifest is fetched, and
// the answers are the same.
func TestSnapshotCatalogSavesRequests(t *testing.T) {
	bin := lifeboatBinary(t)
	srv := s3test.Start(t)
	proxy := srv.Proxy(t)
	loc := proxy.Location(srv.NewBucket(t), "repo")
	e := newEnv(t)
	env := append(os.Environ(), srv.Env()...)
	cache := e.cache
	lb := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--repo", loc, "--cache-dir", cache, "--password-file", e.passwdFile}, args...)...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("lifeboat %v: %v\n%s%s", args, err, out, stderr.String())
		}
		return string(out)
	}
	seen := len(proxy.Log())
	gets := func() int {
		t.Helper()
		log := proxy.Log()
		n := 0
		for _, x := range log[seen:] {
			if x.Method == "GET" && manifestGet.MatchString(x.Path) {
				n++
				t.Logf("GET %s", x.Path)
			}
		}
		seen = len(log)
		return n
	}
	// kept lists the snapshots `forget --workspace ws --keep-last 10
	// --dry-run` keeps: all of ws's.
	kept := func(ws string) []string {
		t.Helper()
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(lb("forget", "--workspace", ws, "--keep-last", "10", "--dry-run", "--json")), "\n") {
			var m struct {
				Type string `json:"message_type"`
				ID   string `json:"id"`
				Keep bool   `json:"keep"`
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("forget --json: %q: %v", l, err)
			}
			if m.ID != "" {
				ids = append(ids, m.Type+" "+m.ID)
			}
		}
		return ids
	}

	lb("init", "--kdf-memory-kib", "64", "--kdf-time", "1")
	busy, quiet := filepath.Join(e.dir, "busy"), filepath.Join(e.dir, "quiet")
	writeTree(t, quiet, 3)
	lb("capture", "--workspace", "quiet", quiet)
	for i := range 6 {
		writeTree(t, busy, uint64(10+i))
		lb("capture", "--workspace", "busy", busy)
	}
	lb("capture", "--workspace", "quiet", quiet)
	lb("forget", "--keep-last", "100", "--dry-run") // every snapshot: the catalog knows them all
	gets()

	quietKept := kept("quiet")
	if len(quietKept) != 2 {
		t.Fatalf("forget --workspace quiet --dry-run: %v, want quiet's 2 snapshots", quietKept)
	}
	if n := gets(); n != 2 {
		t.Errorf("forget --workspace quiet fetched %d manifests, want quiet's 2", n)
	}
	target := filepath.Join(e.dir, "restored")
	lb("restore", "--workspace", "busy", "--target", target, "latest")
	if d, err := bench.Compare(busy, target); err != nil || len(d) > 0 {
		t.Fatalf("restore latest differs from busy's last capture: %v %v", d, err)
	}
	if n := gets(); n != 1 {
		t.Errorf("restore latest fetched %d manifests, want 1", n)
	}
	lb("capture", "--workspace", "busy", busy)
	if n := gets(); n != 1 {
		t.Errorf("a capture's search for its parent fetched %d manifests, want 1", n)
	}

	// A new cache directory knows nothing: every manifest is fetched, and
	// the answer is the same.
	cache = filepath.Join(e.dir, "fresh-cache")
	if got := kept("quiet"); strings.Join(got, " ") != strings.Join(quietKept, " ") {
		t.Fatalf("with a new cache: forget keeps %v, want %v", got, quietKept)
	}
	if n := gets(); n != 9 {
		t.Errorf("with a new cache, forget --workspace quiet fetched %d manifests, want all 9", n)
	}
}
