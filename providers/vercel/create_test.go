package vercel

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
)

// TestCreateRetriedMakesWorkspace: a Create whose sandbox was made and
// recorded but whose workspace directory was not (the command endpoint
// failed) is retried with the same key: it returns the recorded sandbox,
// with its workspace made.
func TestCreateRetriedMakesWorkspace(t *testing.T) {
	s, base, cache := start(t)
	platformtest.CheckRetriedCreate(t, s, newProvider(t, base, cache, "tok"), DefaultWorkspace,
		func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/cmd") }, `{"error":{"code":"bad_gateway","message":"Bad Gateway"}}`)
}

// TestExecBoundsLogStream: a command log stream that never ends (or one
// far larger than the output Lifeboat keeps) is read only up to a bound:
// Exec returns the command's exit code with its stdout cut at
// providers.MaxExecOutput, instead of reading on forever.
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
	if res.ExitCode != 0 || len(res.Stdout) != providers.MaxExecOutput {
		t.Fatalf("Exec = exit %d, %d bytes of stdout; want 0 and %d", res.ExitCode, len(res.Stdout), providers.MaxExecOutput)
	}
}
