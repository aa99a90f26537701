package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lifeboat/bench"
	"lifeboat/server"
)

// lineWatch is a stderr that keeps what was written and closes found once
// it holds the line want.
type lineWatch struct {
	mu    sync.Mutex
	buf   strings.Builder
	want  string
	found chan struct{}
}

func newLineWatch(want string) *lineWatch {
	return &lineWatch{want: want + "\n", found: make(chan struct{})}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.found)
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestServeKill9AtEveryStep: a real `lifeboat serve` running an approved
// recovery is killed with SIGKILL at every step of the state machine (the
// points of recovery.TestKill9AtEveryStep, reached through
// LIFEBOAT_TEST_RECOVERY_STOP_AT), then started again without the stop
// point. The restarted server resumes the operation to recovered: exactly
// one sandbox is left in the provider's root (never two active
// instances), it holds the captured files, the last good checkpoint is
// the one approved, and the generation moved by exactly one. The rounds
// share one repository and binary, one lost workspace per point.
func TestServeKill9AtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	e, flags := lifecycleEnv(t)
	root := filepath.Join(e.dir, "root")
	points := []string{"before:creating", "after:creating", "before:restoring", "after:restoring",
		"before:validating", "before:switching", "after:switching"}
	// One workspace per point, each captured and then lost: its directory
	// leaves the provider's root, kept aside to compare with.
	for i := range points {
		ws := fmt.Sprintf("bot%d", i+1)
		writeTree(t, filepath.Join(root, ws), uint64(i+1))
		e.ok(append(flags, "workspace", "add", ws)...)
		e.ok(append(flags, "capture", "--workspace", ws)...)
		must(t, os.Rename(filepath.Join(root, ws), filepath.Join(e.dir, "want-"+ws)))
	}
	tokFile := filepath.Join(e.dir, "tokens")
	const tok = "serve-kill-token-8"
	must(t, os.WriteFile(tokFile, []byte("user "+server.HashToken(tok)+" inbox\n"), 0o600))
	bin := lifeboatBinary(t)

	var recovered []string // the replacements of the rounds so far
	for i, point := range points {
		ws := fmt.Sprintf("bot%d", i+1)
		before := e.showWorkspace(flags, ws)
		if before.LastGood == nil {
			t.Fatalf("%s: no last good checkpoint: %+v", point, before)
		}

		// The first server stops at point once the approval runs; SIGKILL.
		stop := newLineWatch("at " + point)
		cmd, url := e.startServe(bin, flags, tokFile, []string{recoveryStopEnv + "=" + point}, stop, "--periodic=false")
		var st server.RecoveryState
		code, body := request(t, "GET", url+"/v1/workspaces/"+ws+"/recovery", tok)
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.State != server.StateLost || st.Offer == nil ||
			st.Offer.Checkpoint != before.LastGood.Snapshot {
			t.Fatalf("%s: recovery state: %d %s", point, code, body)
		}
		op := approveRecovery(t, url, tok, ws, st.Offer.Checkpoint, "kill-"+point)
		select {
		case <-stop.found:
		case <-time.After(2 * time.Minute):
			t.Fatalf("serve did not stop at %s\n%s", point, stop)
		}
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		// A new server, without the stop point, finishes the operation.
		stderr := &strings.Builder{}
		cmd, url = e.startServe(bin, flags, tokFile, nil, stderr, "--periodic=false")
		done := waitOperation(t, url, tok, op.ID)
		if done.Step != "recovered" || done.NewInstance == "" {
			t.Fatalf("%s: after the restart: %+v\n%s", point, done, stderr)
		}
		must(t, cmd.Process.Signal(syscall.SIGTERM))
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: serve after SIGTERM: %v\n%s", point, err, stderr)
		}

		// Exactly one new sandbox: the replacement, nothing else created.
		recovered = append(recovered, done.NewInstance)
		slices.Sort(recovered)
		if got := sandboxes(t, root); !slices.Equal(got, recovered) {
			t.Fatalf("%s: sandboxes in the provider's root: %v, want %v", point, got, recovered)
		}
		if d, err := bench.Compare(filepath.Join(e.dir, "want-"+ws), filepath.Join(root, done.NewInstance)); err != nil || len(d) > 0 {
			t.Fatalf("%s: the replacement differs from the captured tree: %v %v", point, d, err)
		}
		after := e.showWorkspace(flags, ws)
		if string(after.Instance) != done.NewInstance || after.Instance == before.Instance || after.LastGood == nil ||
			after.LastGood.Snapshot != before.LastGood.Snapshot || after.Generation != before.Generation+1 {
			t.Fatalf("%s: workspace before %+v, after %+v", point, before, after)
		}
	}
}

// approveRecovery approves checkpoint for workspace ws over HTTP.
func approveRecovery(t *testing.T, url, tok, ws, checkpoint, key string) server.Operation {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/workspaces/"+ws+"/recovery/approve", strings.NewReader(`{"checkpoint":"`+checkpoint+`"}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	var op server.Operation
	if res.StatusCode != http.StatusAccepted || json.NewDecoder(res.Body).Decode(&op) != nil || op.ID == "" {
		t.Fatalf("approve: %d %+v", res.StatusCode, op)
	}
	return op
}

// waitOperation follows the event stream until operation id ends
// (recovered or failed) and returns it as the API shows it then. The
// stream is open before the operation is first read, so no change is
// missed; it is bounded by a two-minute deadline.
func waitOperation(t *testing.T, url, tok, id string) server.Operation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := openEventStream(ctx, t, url, tok)
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream ended before the hello: %v", err)
		}
		if strings.HasPrefix(line, "event: hello") {
			break
		}
	}
	for {
		var op server.Operation
		code, body := request(t, "GET", url+"/v1/operations/"+id, tok)
		if code != http.StatusOK || json.Unmarshal([]byte(body), &op) != nil {
			t.Fatalf("operation %s: %d %s", id, code, body)
		}
		if op.Step == "recovered" || op.Step == "failed" {
			return op
		}
		// Wait for the next event about this operation, then read it again.
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("event stream ended before operation %s did (at %s): %v", id, op.Step, err)
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, id) {
				break
			}
		}
	}
}

// sandboxes lists the instance directories in a local provider's root.
func sandboxes(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(root)
	must(t, err)
	var out []string
	for _, d := range ents {
		if d.Name() != ".lifeboat" {
			out = append(out, d.Name())
		}
	}
	return out
}
