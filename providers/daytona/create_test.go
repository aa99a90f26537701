package daytona

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// TestCreateMakesDeepWorkspace: a workspace whose parent directories the
// image does not have is made by Create, and a tree written there reads
// back.
func TestCreateMakesDeepWorkspace(t *testing.T) {
	s, base, cache := start(t)
	p := providertest.MustNew(t, New, Config{APIKey: "dtn_key", BaseURL: base, CacheDir: cache, Workspace: "/srv/agents/one/workspace"})
	id, src := platformtest.NewWithTree(t, p, "deep", "deep")
	host, err := s.HostPath(string(id), "/srv/agents/one/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(host); err != nil || !fi.IsDir() {
		t.Fatalf("the workspace was not made: %v", err)
	}
	platformtest.WantTree(t, p, id, src, "ReadFiles of the deep workspace")
}

// TestCreateRetriedMakesWorkspace: a Create whose sandbox was made but
// whose workspace directory was not (the toolbox failed) is retried with
// the same key: it returns the same sandbox, with its workspace made.
func TestCreateRetriedMakesWorkspace(t *testing.T) {
	s, base, cache := start(t)
	platformtest.CheckRetriedCreate(t, s, newProvider(t, base, cache, "dtn_key"), DefaultWorkspace,
		func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/toolbox/") }, `{"statusCode":502,"message":"Bad Gateway"}`)
}
