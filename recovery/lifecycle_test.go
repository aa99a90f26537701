package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/checkpoint"
	"lifeboat/providers"
	"lifeboat/snapshot"
)

func TestParkThrottle(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, true, nil)
		ctx := context.Background()
		r := e.l.Park(ctx, "ws1")
		e.want(r, Captured)
		if r.Snapshot == "" || r.LastGood != r.Snapshot || r.Files != 2 {
			t.Fatalf("first park receipt: %+v", r)
		}
		if w := e.ws("ws1"); w.LastGood == nil || w.LastGood.Snapshot != r.Snapshot || w.InFlight != nil {
			t.Fatalf("not promoted: %+v", w)
		}
		// Inside the interval: no capture, however often.
		for _, d := range []time.Duration{time.Second, time.Minute, 3*time.Minute + 58*time.Second} {
			e.clock.Advance(d)
			got := e.l.Park(ctx, "ws1")
			e.want(got, Throttled)
			if got.LastGood != r.Snapshot {
				t.Fatalf("throttled receipt names %q, want %q", got.LastGood, r.Snapshot)
			}
		}
		if n := countSnapshots(t, e.r, "ws1"); n != 1 {
			t.Fatalf("%d snapshots after throttled parks, want 1", n)
		}
		// Outside it (5 min since the last good checkpoint): a capture.
		e.clock.Advance(time.Second)
		r2 := e.l.Park(ctx, "ws1")
		e.want(r2, Captured)
		if n := countSnapshots(t, e.r, "ws1"); n != 2 || r2.Snapshot == r.Snapshot {
			t.Fatalf("%d snapshots, new %s, old %s", n, r2.Snapshot, r.Snapshot)
		}
		cps, err := e.store.Checkpoints("ws1")
		if err != nil || len(cps) != 2 || cps[1].Snapshot != r2.Snapshot || cps[0].Reason != ReasonPark {
			t.Fatalf("checkpoint history %+v, %v", cps, err)
		}
	})
}

func TestParkIntervalConfigurable(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, func(c *Config) { c.ParkInterval = time.Hour })
		ctx := context.Background()
		e.want(e.l.Park(ctx, "ws1"), Captured)
		e.clock.Advance(59 * time.Minute)
		e.want(e.l.Park(ctx, "ws1"), Throttled)
		e.clock.Advance(time.Minute)
		e.want(e.l.Park(ctx, "ws1"), Captured)
	})
}

func TestParkFailureRecordedAndThrottleNotBroken(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, true, nil)
		ctx := context.Background()
		boom := errors.New("scripted repository outage")
		e.cap.fail[1] = boom
		e.cap.fail[3] = boom
		e.cap.fail[4] = boom

		// The first park fails: the failure is recorded and the receipt says
		// so; the caller goes on parking.
		r := e.l.Park(ctx, "ws1")
		e.want(r, Failed)
		if !errors.Is(r.Err, boom) || r.Attempt != 1 || r.Retryable {
			t.Fatalf("receipt: %+v", r)
		}
		w := e.ws("ws1")
		if w.LastGood != nil || w.Failures != 1 || len(w.Recovery) != 1 || w.InFlight != nil {
			t.Fatalf("after a failed park: %+v", w)
		}
		rec := w.Recovery[0]
		if !rec.Time.Equal(e.clock.Now()) || rec.Attempt != 1 || rec.Outcome != Failed || !strings.Contains(rec.Error, "scripted repository outage") || rec.Reason != ReasonPark {
			t.Fatalf("recovery record: %+v", rec)
		}
		// The failure does not start a throttle: the next park, at once,
		// captures.
		e.clock.Advance(time.Second)
		good := e.l.Park(ctx, "ws1")
		e.want(good, Captured)
		if w := e.ws("ws1"); w.Failures != 0 || w.LastGood.Snapshot != good.Snapshot || len(w.Recovery) != 1 {
			t.Fatalf("after recovery: %+v", w)
		}
		// After the interval, two failures in a row; each is recorded with its
		// attempt, the last good checkpoint stays, and the park after them
		// captures although the failures were moments ago.
		e.clock.Advance(6 * time.Minute)
		e.want(e.l.Park(ctx, "ws1"), Failed)
		e.clock.Advance(10 * time.Second)
		r = e.l.Park(ctx, "ws1")
		e.want(r, Failed)
		if r.Attempt != 2 || r.LastGood != good.Snapshot {
			t.Fatalf("second failure: %+v", r)
		}
		if w := e.ws("ws1"); w.LastGood.Snapshot != good.Snapshot || w.Failures != 2 || w.Recovery[2].Attempt != 2 {
			t.Fatalf("after two failures: %+v", w)
		}
		e.clock.Advance(time.Second)
		e.want(e.l.Park(ctx, "ws1"), Captured)
		if n := countSnapshots(t, e.r, "ws1"); n != 2 {
			t.Fatalf("%d snapshots, want 2 (failed captures leave none)", n)
		}
	})
}

func TestPartialCaptureNotPromoted(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, true, nil)
		ctx := context.Background()
		first := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(first, Captured)
		e.cap.partial[2] = true
		r := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(r, Partial)
		if r.Snapshot == "" || r.Snapshot == first.Snapshot || r.LastGood != first.Snapshot {
			t.Fatalf("partial receipt: %+v", r)
		}
		if w := e.ws("ws1"); w.LastGood.Snapshot != first.Snapshot || w.Recovery[0].Outcome != Partial {
			t.Fatalf("partial promoted or not recorded: %+v", w)
		}
		// The throttle runs from the last good checkpoint, which is recent; a
		// park once it has passed captures.
		e.want(e.l.Park(ctx, "ws1"), Throttled)
		e.clock.Advance(5 * time.Minute)
		e.want(e.l.Park(ctx, "ws1"), Captured)
	})
}

func TestUnknownWorkspaceAndProvider(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, nil)
		ctx := context.Background()
		r := e.l.Park(ctx, "nope")
		if r.Outcome != Failed || !errors.Is(r.Err, ErrUnknownWorkspace) {
			t.Fatalf("park of an unknown workspace: %+v", r)
		}
		if err := e.store.AddWorkspace(Workspace{ID: "ws2", Provider: "elsewhere", Instance: "x"}); err != nil {
			t.Fatal(err)
		}
		r = e.l.Capture(ctx, "ws2", ReasonManual)
		if r.Outcome != Failed || !errors.Is(r.Err, ErrUnknownProvider) || !strings.Contains(r.Error, `provider "elsewhere", which is not configured`) {
			t.Fatalf("capture with an unknown provider: %+v", r)
		}
		if w := e.ws("ws2"); len(w.Recovery) != 1 || w.InFlight != nil {
			t.Fatalf("not recorded: %+v", w)
		}
	})
}

func TestConcurrentCapturesJoin(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		const callers = 8
		joined := make(chan int, callers)
		e := newEnv(t, false, true, nil)
		e.l.hooks.joined = func(_ string, n int) { joined <- n }
		e.cap.started = make(chan int, callers)
		e.cap.gate = make(chan struct{})
		ctx := context.Background()
		receipts := make([]Receipt, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				if i%2 == 0 {
					receipts[i] = e.l.Park(ctx, "ws1")
				} else {
					receipts[i] = e.l.Capture(ctx, "ws1", ReasonManual)
				}
			})
		}
		<-e.cap.started
		for range callers {
			<-joined // every caller is waiting on the one flight
		}
		close(e.cap.gate)
		wg.Wait()
		if n := e.cap.count(); n != 1 {
			t.Fatalf("%d captures for %d concurrent requests, want 1", n, callers)
		}
		for i, r := range receipts {
			e.want(r, Captured)
			if r.Snapshot != receipts[0].Snapshot || r.Reason != receipts[0].Reason || !r.Started.Equal(receipts[0].Started) {
				t.Fatalf("receipt %d differs: %+v vs %+v", i, r, receipts[0])
			}
		}
		if n := countSnapshots(t, e.r, "ws1"); n != 1 {
			t.Fatalf("%d snapshots, want 1", n)
		}
	})
}

func TestParallelWorkspacesUpToLimit(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		semWaits := make(chan string, 8)
		e := newEnv(t, false, false, func(c *Config) { c.MaxParallel = 2 })
		e.l.hooks.semWait = func(ws string) { semWaits <- ws }
		e.cap.started = make(chan int, 8)
		e.cap.gate = make(chan struct{})
		for _, id := range []string{"ws2", "ws3"} {
			e.prov.instance(t, providers.InstanceID("i-"+id), map[string]string{"f": id})
			if err := e.store.AddWorkspace(Workspace{ID: id, Provider: "fake", Instance: providers.InstanceID("i-" + id)}); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		for _, id := range []string{"ws1", "ws2", "ws3"} {
			wg.Go(func() { e.want(e.l.Capture(ctx, id, ReasonManual), Captured) })
		}
		<-e.cap.started
		<-e.cap.started
		for range 3 {
			<-semWaits
		}
		// Two captures run; the third waits for a slot.
		if n := e.cap.count(); n != 2 {
			t.Fatalf("%d captures running, want 2", n)
		}
		e.cap.gate <- struct{}{}
		<-e.cap.started // the third starts once one finished
		e.cap.gate <- struct{}{}
		e.cap.gate <- struct{}{}
		wg.Wait()
		if n := e.cap.count(); n != 3 {
			t.Fatalf("%d captures, want 3", n)
		}
	})
}

func TestQuiesceAlwaysResumed(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		cases := []struct {
			name string
			set  func(e *env)
			run  func(e *env) Receipt
			want Outcome
		}{
			{"success", func(*env) {}, nil, Captured},
			{"failure", func(e *env) { e.cap.fail[1] = errors.New("scripted") }, nil, Failed},
			{"panic", func(e *env) { e.cap.panicAt[1] = true }, nil, Failed},
			{"cancel", func(e *env) {
				e.cap.started = make(chan int, 1)
				e.cap.gate = make(chan struct{}) // never opened: only cancellation ends the capture
			}, func(e *env) Receipt {
				ctx, cancel := context.WithCancel(context.Background())
				go func() { <-e.cap.started; cancel() }()
				return e.l.Capture(ctx, "ws1", ReasonManual)
			}, Cancelled},
			{"read files fails", func(e *env) { e.prov.readFilesHook = func() { _ = os.RemoveAll(e.prov.dir("i1")) } }, nil, Failed},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, false, false, nil)
				all, mine := &recWriter{}, &recWriter{}
				e.l.RegisterWriter("", all)
				e.l.RegisterWriter("ws1", mine)
				e.l.RegisterWriter("other", &recWriter{block: true}) // not a writer of ws1
				c.set(e)
				run := c.run
				if run == nil {
					run = func(e *env) Receipt { return e.l.Capture(context.Background(), "ws1", ReasonManual) }
				}
				r := run(e)
				e.want(r, c.want)
				for _, w := range []*recWriter{all, mine} {
					if p, res := w.counts(); p != 1 || res != 1 {
						t.Fatalf("writer paused %d, resumed %d times", p, res)
					}
				}
				if c.name == "panic" {
					var pe *PanicError
					if !errors.As(r.Err, &pe) {
						t.Fatalf("panic receipt: %+v", r)
					}
				}
				w := e.ws("ws1")
				if w.InFlight != nil || (c.want != Captured && (w.LastGood != nil || len(w.Recovery) != 1 || w.Recovery[0].Outcome != c.want)) {
					t.Fatalf("workspace after %s: %+v", c.name, w)
				}
				// The lifecycle is usable afterwards.
				e.cap.gate = nil
				e.prov.readFilesHook = nil
				e.prov.instance(t, "i1", map[string]string{"a.txt": "again"})
				e.want(e.l.Capture(context.Background(), "ws1", ReasonManual), Captured)
			})
		}
	})
}

func TestCancelOneCallerKeepsCaptureForOthers(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		joined := make(chan int, 4)
		e := newEnv(t, false, false, nil)
		e.l.hooks.joined = func(_ string, n int) { joined <- n }
		e.cap.started = make(chan int, 1)
		e.cap.gate = make(chan struct{})
		quitter, cancel := context.WithCancel(context.Background())
		first := make(chan Receipt)
		go func() { first <- e.l.Capture(quitter, "ws1", ReasonManual) }()
		<-e.cap.started
		<-joined
		second := make(chan Receipt)
		go func() { second <- e.l.Park(context.Background(), "ws1") }()
		<-joined
		cancel()
		if r := <-first; r.Outcome != Cancelled {
			t.Fatalf("the caller that gave up: %+v", r)
		}
		close(e.cap.gate)
		r := <-second
		e.want(r, Captured)
		if e.cap.count() != 1 {
			t.Fatalf("%d captures", e.cap.count())
		}
	})
}

func TestQuiesceTimeout(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, func(c *Config) { c.QuiesceTimeout = 10 * time.Second })
		stuck := &recWriter{block: true, paused: make(chan struct{}, 1)}
		e.l.RegisterWriter("ws1", stuck)
		done := make(chan Receipt)
		go func() { done <- e.l.Park(context.Background(), "ws1") }()
		<-stuck.paused
		e.clock.WaitFor(t, 10*time.Second) // the quiesce deadline
		e.clock.Advance(10 * time.Second)
		r := <-done
		e.want(r, QuiesceTimeout)
		if !errors.Is(r.Err, ErrQuiesceTimeout) || !r.Retryable {
			t.Fatalf("receipt: %+v", r)
		}
		if p, res := stuck.counts(); p != 1 || res != 1 {
			t.Fatalf("paused %d, resumed %d", p, res)
		}
		if w := e.ws("ws1"); w.Recovery[0].Outcome != QuiesceTimeout || e.cap.count() != 0 {
			t.Fatalf("recorded %+v, captures %d", w.Recovery, e.cap.count())
		}
	})
}

// chromiumProfile writes the smallest Chromium user-data-dir the profile
// package recognises, locked by process pid on this host.
func chromiumProfile(t *testing.T, dir string, pid int) {
	t.Helper()
	writeFiles(t, dir, map[string]string{"Local State": "{}", "Default/Preferences": "{}"})
	lockProfile(t, dir, pid)
}

// lockProfile makes a Chromium SingletonLock naming process pid here.
func lockProfile(t *testing.T, dir string, pid int) {
	t.Helper()
	host, _ := os.Hostname()
	if err := os.Symlink(host+"-"+strconv.Itoa(pid), filepath.Join(dir, "SingletonLock")); err != nil {
		t.Fatal(err)
	}
}

func TestQuiesceWaitsForBrowser(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, func(c *Config) { c.QuiesceTimeout = 10 * time.Second; c.QuiescePoll = time.Second })
		prof := filepath.Join(e.prov.dir("i1"), "chrome")
		chromiumProfile(t, prof, os.Getpid()) // a live process holds the lock
		done := make(chan Receipt)
		go func() { done <- e.l.Capture(context.Background(), "ws1", ReasonManual) }()
		e.clock.WaitFor(t, time.Second) // polling a running browser
		e.clock.Advance(time.Second)
		e.clock.WaitFor(t, time.Second) // still running: polls again
		if err := os.Remove(filepath.Join(prof, "SingletonLock")); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		e.want(<-done, Captured)

		// A browser that never stops: a distinct, retryable status.
		chromiumProfile(t, prof, os.Getpid())
		go func() { done <- e.l.Capture(context.Background(), "ws1", ReasonManual) }()
		e.clock.WaitFor(t, time.Second)
		e.clock.Advance(10 * time.Second)
		r := <-done
		e.want(r, QuiesceTimeout)
		if !r.Retryable || !strings.Contains(r.Error, "browser running") {
			t.Fatalf("receipt: %+v", r)
		}
	})
}

// A capturer that checks the profiles it finds (RepoCapturer) runs first:
// the lifecycle waits for the browser only once the capture reports it
// running, then captures again; one that never stops ends the capture
// at the quiesce deadline, as when the lifecycle searched first.
func TestCaptureFindsRunningBrowserThenWaits(t *testing.T) {
	e := newEnv(t, false, true, func(c *Config) { c.QuiesceTimeout = 10 * time.Second; c.QuiescePoll = time.Second })
	prof := filepath.Join(e.prov.dir("i1"), "chrome")
	chromiumProfile(t, prof, os.Getpid()) // a live process holds the lock
	done := make(chan Receipt)
	go func() { done <- e.l.Capture(context.Background(), "ws1", ReasonManual) }()
	e.clock.WaitFor(t, time.Second) // the capture found it running: polling
	if n := e.cap.count(); n != 1 {
		t.Fatalf("%d captures before the wait, want the one that found the browser", n)
	}
	if err := os.Remove(filepath.Join(prof, "SingletonLock")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	r := <-done
	e.want(r, Captured)
	if n := e.cap.count(); n != 2 {
		t.Fatalf("%d captures, want the one that found the browser and the one after the wait", n)
	}
	m, err := snapshot.LoadManifest(context.Background(), e.r, mustID(t, r.Snapshot))
	if err != nil || m.Sensitive == nil {
		t.Fatalf("the profile is not in the sensitive part: %v", err)
	}

	chromiumProfile(t, prof, os.Getpid())
	go func() { done <- e.l.Capture(context.Background(), "ws1", ReasonManual) }()
	e.clock.WaitFor(t, time.Second)
	e.clock.Advance(10 * time.Second)
	r = <-done
	e.want(r, QuiesceTimeout)
	if !r.Retryable || !strings.Contains(r.Error, "browser running") || e.ws("ws1").LastGood.Snapshot == "" {
		t.Fatalf("receipt: %+v", r)
	}
}

func TestInterruptedCaptureRecordedAtOpen(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, nil)
		good := e.l.Capture(context.Background(), "ws1", ReasonManual)
		e.want(good, Captured)
		// What a process killed mid-capture leaves: the in-flight mark.
		err := e.store.update("ws1", func(_ stateTx, w *Workspace) error {
			w.InFlight = &InFlight{Started: e.clock.Now(), Reason: ReasonPark, PID: 4242}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		l2, err := New(Config{Store: e.store, Capturer: e.cap, Providers: []providers.Provider{e.prov}, Clock: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		w := e.ws("ws1")
		if w.InFlight != nil || w.LastGood.Snapshot != good.Snapshot || len(w.Recovery) != 1 || w.Recovery[0].Outcome != Interrupted ||
			!strings.Contains(w.Recovery[0].Error, "process 4242") || w.Failures != 1 {
			t.Fatalf("after reopening: %+v", w)
		}
		// The throttle still runs from the last good checkpoint.
		e.want(l2.Park(context.Background(), "ws1"), Throttled)
		e.want(l2.Capture(context.Background(), "ws1", ReasonManual), Captured)
	})
}

func TestVerify(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, true, nil)
		r := e.l.Capture(context.Background(), "ws1", ReasonManual)
		e.want(r, Captured)
		id, err := blob.ParseID(r.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.Verify(context.Background(), e.r, id); err != nil {
			t.Fatalf("verify of a good snapshot: %v", err)
		}
		id[0] ^= 1
		if err := checkpoint.Verify(context.Background(), e.r, id); err == nil {
			t.Fatal("verify of a snapshot that is not there passed")
		}
	})
}
