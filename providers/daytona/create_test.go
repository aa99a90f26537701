package daytona

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// TestCreateMakesDeepWorkspace: a workspace whose parent directories the
// image does not have is made by Create, and a tree written there reads
// back.
func TestCreateMakesDeepWorkspace(t *testing.T) {
	s, base, cache := start(t)
	p, err := New(Config{APIKey: "dtn_key", BaseURL: base, CacheDir: cache, Workspace: "/srv/agents/one/workspace"})
	if err != nil {
		t.Fatal(err)
	}
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
	p := newProvider(t, base, cache, "dtn_key")
	ctx := context.Background()
	s.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/toolbox/") {
			return false
		}
		return platformtest.Status(http.StatusBadGateway, `{"statusCode":502,"message":"Bad Gateway"}`, "")(w, r)
	})
	_, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "retry"})
	providertest.WantKind(t, "Create with the toolbox down", err, providers.KindUnavailable)
	s.SetFault(nil)
	boxes := s.List(nil)
	if len(boxes) != 1 {
		t.Fatalf("%d sandboxes after the failed Create, want 1", len(boxes))
	}
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "retry"})
	if err != nil {
		t.Fatal(err)
	}
	if string(id) != boxes[0].ID || len(s.List(nil)) != 1 {
		t.Fatalf("the retried Create returned %s (sandboxes %d), want the first one %s", id, len(s.List(nil)), boxes[0].ID)
	}
	host, err := s.HostPath(string(id), DefaultWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(host); err != nil || !fi.IsDir() {
		t.Fatalf("the retried Create did not make the workspace: %v", err)
	}
}
