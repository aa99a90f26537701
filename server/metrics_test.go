package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/recovery"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func receipt(reason recovery.Reason, o recovery.Outcome, took time.Duration, bytes, newBytes uint64) recovery.Receipt {
	return recovery.Receipt{Workspace: "bot1", Reason: reason, Outcome: o, Started: t0, Finished: t0.Add(took), Bytes: bytes, NewBytes: newBytes}
}

// Every receipt is counted by reason and outcome; only those that ran a
// capture are timed; only those that wrote a snapshot add bytes.
func TestMetricsReceipts(t *testing.T) {
	t.Parallel()
	m := NewMetrics(MetricsSource{})
	for _, r := range []recovery.Receipt{
		receipt(recovery.ReasonPark, recovery.Captured, 2*time.Second, 1000, 300),
		receipt(recovery.ReasonPark, recovery.Captured, 40*time.Millisecond, 1000, 0),
		receipt(recovery.ReasonPark, recovery.Throttled, 0, 0, 0),
		receipt(recovery.ReasonPeriodic, recovery.Unchanged, time.Second, 0, 0),
		receipt(recovery.ReasonPeriodic, recovery.NotRunning, 0, 0, 0),
		receipt(recovery.ReasonPeriodic, recovery.Partial, 20*time.Minute, 500, 500),
		receipt(recovery.ReasonManual, recovery.Failed, 3*time.Second, 0, 0),
		receipt(recovery.ReasonManual, recovery.QuiesceTimeout, 31*time.Minute, 0, 0),
		receipt(recovery.ReasonManual, recovery.Cancelled, 200*time.Millisecond, 0, 0),
		receipt(recovery.ReasonManual, recovery.Refused, time.Second, 0, 0),
		receipt("", recovery.Failed, -time.Second, 0, 0), // a clock step: counted, not timed
	} {
		m.Receipt(r)
	}
	want := `
# HELP lifeboat_captures_total Capture requests (park, periodic, manual) by reason and outcome, throttled, unchanged and not_running included.
# TYPE lifeboat_captures_total counter
lifeboat_captures_total{outcome="captured",reason="park"} 2
lifeboat_captures_total{outcome="throttled",reason="park"} 1
lifeboat_captures_total{outcome="unchanged",reason="periodic"} 1
lifeboat_captures_total{outcome="not_running",reason="periodic"} 1
lifeboat_captures_total{outcome="partial",reason="periodic"} 1
lifeboat_captures_total{outcome="failed",reason="manual"} 1
lifeboat_captures_total{outcome="quiesce_timeout",reason="manual"} 1
lifeboat_captures_total{outcome="cancelled",reason="manual"} 1
lifeboat_captures_total{outcome="refused",reason="manual"} 1
lifeboat_captures_total{outcome="failed",reason="unknown"} 1
# HELP lifeboat_capture_bytes_total Bytes of the files in the snapshots captures wrote (captured and partial).
# TYPE lifeboat_capture_bytes_total counter
lifeboat_capture_bytes_total 2500
# HELP lifeboat_capture_new_bytes_total Bytes of new content the captures added to the repository (captured and partial).
# TYPE lifeboat_capture_new_bytes_total counter
lifeboat_capture_new_bytes_total 800
# HELP lifeboat_capture_duration_seconds Time from start to end of the capture requests that ran a capture (captured, partial, failed, quiesce_timeout, cancelled), by reason.
# TYPE lifeboat_capture_duration_seconds histogram
` + histogram("manual", 3+31*60+0.2, 0.2, 3, 31*60) +
		histogram("park", 2.04, 0.04, 2) +
		histogram("periodic", 20*60, 20*60)
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "lifeboat_captures_total",
		"lifeboat_capture_bytes_total", "lifeboat_capture_new_bytes_total", "lifeboat_capture_duration_seconds"); err != nil {
		t.Fatal(err)
	}
}

// histogram renders the exposition lines of one reason's series of
// lifeboat_capture_duration_seconds holding observations obs (seconds).
func histogram(reason string, sum float64, obs ...float64) string {
	var b strings.Builder
	for _, le := range captureBuckets {
		n := 0
		for _, o := range obs {
			if o <= le {
				n++
			}
		}
		fmt.Fprintf(&b, "lifeboat_capture_duration_seconds_bucket{reason=%q,le=\"%g\"} %d\n", reason, le, n)
	}
	fmt.Fprintf(&b, "lifeboat_capture_duration_seconds_bucket{reason=%q,le=\"+Inf\"} %d\n", reason, len(obs))
	fmt.Fprintf(&b, "lifeboat_capture_duration_seconds_sum{reason=%q} %g\n", reason, sum)
	fmt.Fprintf(&b, "lifeboat_capture_duration_seconds_count{reason=%q} %d\n", reason, len(obs))
	return b.String()
}

func TestMetricsPrune(t *testing.T) {
	t.Parallel()
	m := NewMetrics(MetricsSource{})
	want := `
# HELP lifeboat_prune_runs_total Prune runs by outcome (ok, failed).
# TYPE lifeboat_prune_runs_total counter
lifeboat_prune_runs_total{outcome="ok"} %d
lifeboat_prune_runs_total{outcome="failed"} %d
# HELP lifeboat_prune_bytes_freed_total Bytes of pack files prune deleted, failed runs' deletions included.
# TYPE lifeboat_prune_bytes_freed_total counter
lifeboat_prune_bytes_freed_total %d
`
	compare := func(ok, failed, freed int) {
		t.Helper()
		if err := testutil.GatherAndCompare(m.reg, strings.NewReader(fmt.Sprintf(want, ok, failed, freed)),
			"lifeboat_prune_runs_total", "lifeboat_prune_bytes_freed_total"); err != nil {
			t.Fatal(err)
		}
	}
	compare(0, 0, 0) // both outcomes are there before the first run
	m.Prune(prune.Stats{PacksDeleted: 3, BytesDeleted: 3 << 20}, nil)
	m.Prune(prune.Stats{}, nil)
	m.Prune(prune.Stats{PacksDeleted: 1, BytesDeleted: 1000}, errors.New("backend went away")) // deleted one pack, then failed
	compare(2, 1, 3<<20+1000)
}

type fakeWorkspaces struct {
	ws  []recovery.Workspace
	err error
}

func (f *fakeWorkspaces) Workspaces() ([]recovery.Workspace, error) { return f.ws, f.err }

type fakeOperations struct {
	ops []recovery.Operation
	err error
}

func (f *fakeOperations) Operations(ws string) ([]recovery.Operation, error) {
	if ws != "" {
		return nil, fmt.Errorf("metrics asked for the operations of %q, not of all workspaces", ws)
	}
	return f.ops, f.err
}

type fakeHolds struct {
	holds []recovery.Hold
	err   error
}

func (f *fakeHolds) RepairHolds() ([]recovery.Hold, error) { return f.holds, f.err }

func health(s recovery.HealthState) *recovery.Health { return &recovery.Health{State: s} }

func good(at time.Time) *recovery.Checkpoint { return &recovery.Checkpoint{Snapshot: "ab12", Time: at} }

// The gauges are read from the sources at each scrape, through Handler:
// ages against the injected clock, workspaces by health, operations by
// state, open holds.
func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	now := t0
	wss := &fakeWorkspaces{ws: []recovery.Workspace{
		{ID: "bot1", LastGood: good(t0.Add(-90 * time.Second)), Health: health(recovery.HealthOK)},
		{ID: "bot2", LastGood: good(t0.Add(-2 * time.Hour)), Health: health(recovery.HealthLost)},
		{ID: "bot3", Health: health(recovery.HealthOK)},   // no checkpoint yet: no age
		{ID: "bot4", LastGood: good(t0.Add(time.Minute))}, // clock behind the checkpoint: age 0; never inspected
	}}
	ops := &fakeOperations{ops: []recovery.Operation{{State: recovery.OpRecovered}, {State: recovery.OpRecovered},
		{State: recovery.OpRestoring}, {State: recovery.OpFailed}}}
	holds := &fakeHolds{holds: []recovery.Hold{{ID: "hold-1"}}}
	m := NewMetrics(MetricsSource{Workspaces: wss, Operations: ops, Holds: holds, Now: func() time.Time { return now }})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	want := `
# HELP lifeboat_last_good_age_seconds Seconds since the start of the capture of each workspace's last good checkpoint (workspaces without one are left out).
# TYPE lifeboat_last_good_age_seconds gauge
lifeboat_last_good_age_seconds{workspace="bot1"} %g
lifeboat_last_good_age_seconds{workspace="bot2"} %g
lifeboat_last_good_age_seconds{workspace="bot4"} %g
# HELP lifeboat_workspaces Workspaces by the health their last inspection found (unknown: not inspected yet).
# TYPE lifeboat_workspaces gauge
lifeboat_workspaces{health="ok"} 2
lifeboat_workspaces{health="lost"} 1
lifeboat_workspaces{health="unreachable"} 0
lifeboat_workspaces{health="auth_failed"} 0
lifeboat_workspaces{health="rate_limited"} 0
lifeboat_workspaces{health="check_failed"} 0
lifeboat_workspaces{health="recovering"} 0
lifeboat_workspaces{health="unknown"} 1
# HELP lifeboat_recovery_operations Recovery operations in the state store by state, the terminal recovered and failed included.
# TYPE lifeboat_recovery_operations gauge
lifeboat_recovery_operations{state="approved"} 0
lifeboat_recovery_operations{state="creating"} 0
lifeboat_recovery_operations{state="restoring"} 1
lifeboat_recovery_operations{state="validating"} 0
lifeboat_recovery_operations{state="switching"} 0
lifeboat_recovery_operations{state="rolling_back"} 0
lifeboat_recovery_operations{state="recovered"} 2
lifeboat_recovery_operations{state="failed"} 1
# HELP lifeboat_repair_holds_open Repair holds waiting for an operator's resolution.
# TYPE lifeboat_repair_holds_open gauge
lifeboat_repair_holds_open %d
`
	names := []string{"lifeboat_last_good_age_seconds", "lifeboat_workspaces", "lifeboat_recovery_operations", "lifeboat_repair_holds_open"}
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(fmt.Sprintf(want, 90.0, 7200.0, 0.0, 1)), names...); err != nil {
		t.Fatal(err)
	}
	// The next scrape reads again: time passed, the hold was resolved.
	now = t0.Add(10 * time.Second)
	holds.holds = nil
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(fmt.Sprintf(want, 100.0, 7210.0, 0.0, 0)), names...); err != nil {
		t.Fatal(err)
	}
}

// A source that fails leaves its own metrics out of the scrape, is
// counted, and the rest is still served.
func TestMetricsSourceErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("state store: database not open")
	m := NewMetrics(MetricsSource{Workspaces: &fakeWorkspaces{err: boom}, Operations: &fakeOperations{err: boom},
		Holds: &fakeHolds{holds: make([]recovery.Hold, 2)}})
	m.Receipt(receipt(recovery.ReasonPark, recovery.Captured, time.Second, 1, 1))
	for range 2 {
		res, body := get(t, m.Handler())
		if res.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %d\n%s", res.StatusCode, body)
		}
		for _, absent := range []string{"lifeboat_last_good_age_seconds", "lifeboat_workspaces", "lifeboat_recovery_operations"} {
			if strings.Contains(body, absent+"{") {
				t.Fatalf("%s served from a source that failed:\n%s", absent, body)
			}
		}
	}
	want := `
# HELP lifeboat_metrics_source_errors_total Scrapes whose read of a source (workspaces, operations, holds) failed; its metrics were left out of that scrape.
# TYPE lifeboat_metrics_source_errors_total counter
lifeboat_metrics_source_errors_total{source="workspaces"} 3
lifeboat_metrics_source_errors_total{source="operations"} 3
lifeboat_metrics_source_errors_total{source="holds"} 0
# HELP lifeboat_repair_holds_open Repair holds waiting for an operator's resolution.
# TYPE lifeboat_repair_holds_open gauge
lifeboat_repair_holds_open 2
# HELP lifeboat_captures_total Capture requests (park, periodic, manual) by reason and outcome, throttled, unchanged and not_running included.
# TYPE lifeboat_captures_total counter
lifeboat_captures_total{outcome="captured",reason="park"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "lifeboat_metrics_source_errors_total",
		"lifeboat_repair_holds_open", "lifeboat_captures_total"); err != nil {
		t.Fatal(err)
	}
}

// Without any source (and before SetSource), the counters, the key
// derivations and the Go and process collectors are served, and nothing
// read from a source.
func TestMetricsNoSource(t *testing.T) {
	t.Parallel()
	m := NewMetrics(MetricsSource{})
	res, body := get(t, m.Handler())
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, name := range []string{"lifeboat_key_derivations_total ", "lifeboat_prune_runs_total{", "go_goroutines ", "process_cpu_seconds_total ",
		"lifeboat_metrics_source_errors_total{"} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("%s missing from the scrape", strings.TrimSpace(name))
		}
	}
	for _, name := range []string{"lifeboat_workspaces", "lifeboat_recovery_operations", "lifeboat_repair_holds_open"} {
		if strings.Contains(body, "\n"+name) {
			t.Errorf("%s served without a source", name)
		}
	}
	if problems, err := testutil.GatherAndLint(m.reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// lifeboat_key_derivations_total follows crypt.KeyDerivations: it moves
// when a key is derived from a password.
func TestMetricsKeyDerivations(t *testing.T) {
	m := NewMetrics(MetricsSource{})
	want := func(n uint64) io.Reader {
		return strings.NewReader(fmt.Sprintf(`
# HELP lifeboat_key_derivations_total Password key derivations (argon2id) this process did; captures by a server that holds its unlocked keys do none.
# TYPE lifeboat_key_derivations_total counter
lifeboat_key_derivations_total %d
`, n))
	}
	before := crypt.KeyDerivations()
	if err := testutil.GatherAndCompare(m.reg, want(before), "lifeboat_key_derivations_total"); err != nil {
		t.Fatal(err)
	}
	if _, err := crypt.NewKeyFile(crypt.NewMasterKeys(), blob.Tiers, []byte("pw"), crypt.NewKDFParams(1, 64, 1), blob.ID{1}, crypt.KeyFileMeta{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(m.reg, want(before+1), "lifeboat_key_derivations_total"); err != nil {
		t.Fatal(err)
	}
}

// Over a real lifecycle and state store, read through the server's seam:
// a capture's receipt is counted, the workspace's age is read from the
// store, and the capture, done with
// the repository's keys held in memory, derives no key.
func TestMetricsLifecycle(t *testing.T) {
	e := newEnv(t)
	e.workspace("bot1", map[string]string{"a.txt": "hello"})
	var now time.Time
	m := NewMetrics(MetricsSource{})
	m.SetSource(MetricsSource{Workspaces: e.rec, Operations: e.rec, Holds: e.rec, Now: func() time.Time { return now }})
	before := crypt.KeyDerivations()
	r := e.life.Capture(context.Background(), "bot1", recovery.ReasonManual)
	if r.Outcome != recovery.Captured {
		t.Fatalf("capture: %+v", r)
	}
	m.Receipt(r)
	if got := crypt.KeyDerivations() - before; got != 0 {
		t.Fatalf("a capture through the lifecycle derived %d keys", got)
	}
	w, err := e.life.Store().Workspace("bot1")
	must(t, err)
	now = w.LastGood.Time.Add(42 * time.Second)
	want := fmt.Sprintf(`
# HELP lifeboat_captures_total Capture requests (park, periodic, manual) by reason and outcome, throttled, unchanged and not_running included.
# TYPE lifeboat_captures_total counter
lifeboat_captures_total{outcome="captured",reason="manual"} 1
# HELP lifeboat_last_good_age_seconds Seconds since the start of the capture of each workspace's last good checkpoint (workspaces without one are left out).
# TYPE lifeboat_last_good_age_seconds gauge
lifeboat_last_good_age_seconds{workspace="bot1"} 42
# HELP lifeboat_key_derivations_total Password key derivations (argon2id) this process did; captures by a server that holds its unlocked keys do none.
# TYPE lifeboat_key_derivations_total counter
lifeboat_key_derivations_total %d
# HELP lifeboat_capture_bytes_total Bytes of the files in the snapshots captures wrote (captured and partial).
# TYPE lifeboat_capture_bytes_total counter
lifeboat_capture_bytes_total %d
`, before, r.Bytes)
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "lifeboat_captures_total", "lifeboat_last_good_age_seconds",
		"lifeboat_key_derivations_total", "lifeboat_capture_bytes_total"); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, h http.Handler) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Result(), rec.Body.String()
}
