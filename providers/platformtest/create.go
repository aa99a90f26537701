package platformtest

import (
	"context"
	"net/http"
	"os"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

// CheckRetriedCreate checks that a Create of p whose sandbox was made but
// whose workspace directory was not (every request down answers 502 while
// down(r) is true) is retried with the same key: it returns the first
// sandbox, the only one, with its workspace made.
func CheckRetriedCreate(t *testing.T, s *Sandboxes, p providers.Provider, workspace string, down func(*http.Request) bool, body string) {
	t.Helper()
	ctx := context.Background()
	s.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		return down(r) && Status(http.StatusBadGateway, body, "")(w, r)
	})
	_, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "retry"})
	providertest.WantKind(t, "Create with the data plane down", err, providers.KindUnavailable)
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
	host, err := s.HostPath(string(id), workspace)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(host); err != nil || !fi.IsDir() {
		t.Fatalf("the retried Create did not make the workspace: %v", err)
	}
}
