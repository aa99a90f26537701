package vercel

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// TestCreateRetriedMakesWorkspace: a Create whose sandbox was made and
// recorded but whose workspace directory was not (the command endpoint
// failed) is retried with the same key: it returns the recorded sandbox,
// with its workspace made.
func TestCreateRetriedMakesWorkspace(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "tok")
	ctx := context.Background()
	s.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/cmd") {
			return false
		}
		return platformtest.Status(http.StatusBadGateway, `{"error":{"code":"bad_gateway","message":"Bad Gateway"}}`, "")(w, r)
	})
	_, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "retry"})
	providertest.WantKind(t, "Create with the command endpoint down", err, providers.KindUnavailable)
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

// TestExecBoundsLogStream: a command log stream that never ends (or one
// far larger than the output Lifeboat keeps) is read only up to a bound:
// Exec returns the command's exit code with its stdout cut at maxOutput,
// instead of reading on forever.
func TestExecBoundsLogStream(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "tok")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "logs"})
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"stream":"stdout","data":"` + strings.Repeat("a", 32<<10) + `"}` + "\n")
	s.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/logs") {
			return false
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		for {
			if _, err := w.Write(line); err != nil {
				return true
			}
		}
	})
	res, err := p.Exec(ctx, id, []string{"true"}, nil)
	if err != nil {
		t.Fatalf("Exec with an endless log stream: %v", err)
	}
	if res.ExitCode != 0 || len(res.Stdout) != maxOutput {
		t.Fatalf("Exec = exit %d, %d bytes of stdout; want 0 and %d", res.ExitCode, len(res.Stdout), maxOutput)
	}
}
