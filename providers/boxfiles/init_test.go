package boxfiles

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInit: the cache directory is required, the workspace must pass
// CheckWorkspace (errors start with the adapter's name), and the mirrors
// go in <cache>/mirrors.
func TestInit(t *testing.T) {
	for _, c := range []struct{ workspace, cache, want string }{
		{"/w", "", "vercel: a cache directory is required"},
		{"w", "/c", `vercel: the workspace "w" must be an absolute directory`},
		{"/", "/c", `vercel: the workspace "/" must be an absolute directory`},
		{"/a/-w", "/c", "vercel: the workspace \"/a/-w\": its last name starts with -"},
	} {
		var f Files
		if err := f.Init("vercel", nil, c.workspace, c.cache); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Init(%q, %q) = %v, want %q...", c.workspace, c.cache, err, c.want)
		}
	}
	var f Files
	if err := f.Init("daytona", nil, "/home/daytona/workspace/", "/c"); err != nil {
		t.Fatal(err)
	}
	if f.Provider != "daytona" || f.Layout.Workspace != "/home/daytona/workspace" || f.CacheDir != filepath.Join("/c", "mirrors") {
		t.Fatalf("Init set %q, %q, %q", f.Provider, f.Layout.Workspace, f.CacheDir)
	}
}
