// Package livetest is the live smoke test of a provider instance: the
// whole recovery story run once against the real platform, on a
// disposable instance the test creates. It creates an instance, writes a
// tree and a browser profile fixture into it, takes a native checkpoint
// (where the provider has them) and a portable capture into the
// repository, destroys the instance and checks the provider confirms it
// missing, recovers the capture into a replacement, compares, rolls back
// to the native checkpoint and compares again, and destroys everything it
// made.
//
// Invariant: it never touches an instance it did not create. Every
// Destroy, Rollback and DeleteCheckpoint names an id one of its own
// Create, Rollback or Checkpoint calls returned.
package livetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"lifeboat/profile/fixture"
	"lifeboat/providers"
	"lifeboat/recovery"
)

// Result of a check or a whole test.
type Result string

const (
	Passed  Result = "passed"
	Failed  Result = "failed"
	Skipped Result = "skipped" // the provider does not offer it
	Blocked Result = "blocked" // not run: credentials or configuration missing
)

// Check is one step of the test.
type Check struct {
	Name    string  `json:"name"`
	Result  Result  `json:"result"`
	Detail  string  `json:"detail,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Report is what a test did.
type Report struct {
	Provider  string   `json:"provider"` // the instance's name in the config
	Type      string   `json:"type"`     // its adapter
	Result    Result   `json:"result"`
	Reason    string   `json:"reason,omitempty"` // why it was blocked or failed
	Checks    []Check  `json:"checks"`
	Created   []string `json:"created"`             // instances and checkpoints it made
	Destroyed []string `json:"destroyed"`           // of those, what it removed
	Left      []string `json:"left,omitempty"`      // of those, what it could not remove
	Snapshot  string   `json:"snapshot,omitempty"`  // the portable capture, kept in the repository
	Workspace string   `json:"workspace,omitempty"` // the workspace id it was captured under
	Seconds   float64  `json:"seconds"`
}

// Options say what to test and where to capture.
type Options struct {
	Name     string // the provider instance's name
	Type     string
	Provider providers.Provider
	Capturer recovery.Capturer
	Restorer recovery.Restorer
	// RepoLock runs fn under the repository lock captures and restores
	// need (a shared lock).
	RepoLock func(ctx context.Context, fn func() error) error
	TempDir  string // scratch; the caller removes it
	Seed     uint64 // of the profile fixture
}

// BlockedReport is the report of a provider that could not be tested.
func BlockedReport(name, typ, reason string) Report {
	return Report{Provider: name, Type: typ, Result: Blocked, Reason: reason, Checks: []Check{}, Created: []string{}, Destroyed: []string{}}
}

type run struct {
	o       Options
	ctx     context.Context
	r       *Report
	p       providers.Provider
	keep    providers.FileSupport
	fx      *fixture.Fixture
	src     string
	created []providers.InstanceID
	alive   map[providers.InstanceID]bool // made and not destroyed since
	cps     []providers.CheckpointID
}

// Run runs the test and returns its report; it fails at the first failed
// step and always cleans up what it made.
func Run(ctx context.Context, o Options) (rep Report) {
	start := time.Now()
	rep = Report{Provider: o.Name, Type: o.Type, Result: Passed, Checks: []Check{}, Created: []string{}, Destroyed: []string{},
		Workspace: "lifeboat-provider-test-" + o.Name}
	t := &run{o: o, ctx: ctx, r: &rep, p: o.Provider, fx: fixture.New(o.Seed), alive: map[providers.InstanceID]bool{}}
	defer func() { rep.Seconds = time.Since(start).Seconds() }()
	defer t.cleanup()
	caps := t.p.Capabilities()
	if !caps.Create || !caps.Files {
		rep.Result, rep.Reason = Failed, "the provider cannot create instances or has no file access: nothing to test"
		return rep
	}
	if fsr, ok := t.p.(providers.FileSupporter); ok {
		keep, err := fsr.FileSupport(ctx)
		if err != nil {
			t.fail("file support", 0, err)
			return rep
		}
		t.keep = keep
	}
	key := fmt.Sprintf("lifeboat-provider-test-%s-%d", o.Name, time.Now().UnixNano())
	var first providers.InstanceID
	var cp providers.CheckpointID
	var snap string
	steps := []struct {
		name string
		fn   func() (string, error)
	}{
		{"create", func() (string, error) {
			id, err := t.create(key + "-a")
			first = id
			return "instance " + string(id), err
		}},
		{"write files and a browser profile", func() (string, error) { return t.write(first) }},
		{"native checkpoint", func() (string, error) {
			if !caps.NativeCheckpoints {
				return "", errSkip
			}
			c, err := t.p.Checkpoint(ctx, first)
			if err == nil {
				cp = c
				t.cps = append(t.cps, c)
				rep.Created = append(rep.Created, "checkpoint "+string(c))
			}
			return "checkpoint " + string(c), err
		}},
		{"portable capture", func() (string, error) {
			s, err := t.capture(first)
			snap = s
			return "snapshot " + s, err
		}},
		{"destroy and confirm missing", func() (string, error) { return t.destroyConfirm(first) }},
		{"recover into a replacement", func() (string, error) {
			id, err := t.create(key + "-b")
			if err != nil {
				return "", err
			}
			if err := t.restoreInto(snap, id); err != nil {
				return "", err
			}
			return "instance " + string(id) + ": " + t.compared(true), t.compare(id, true)
		}},
		{"rollback to the native checkpoint", func() (string, error) {
			if cp == "" {
				return "", errSkip
			}
			id, err := t.p.Rollback(ctx, first, cp)
			if err != nil {
				return "", err
			}
			t.own(id)
			return "instance " + string(id) + ": " + t.compared(false), t.compare(id, false)
		}},
	}
	for _, s := range steps {
		begin := time.Now()
		detail, err := s.fn()
		switch {
		case errors.Is(err, errSkip):
			rep.Checks = append(rep.Checks, Check{Name: s.name, Result: Skipped, Detail: "the provider does not offer it"})
		case err != nil:
			t.fail(s.name, time.Since(begin), err)
			return rep
		default:
			rep.Checks = append(rep.Checks, Check{Name: s.name, Result: Passed, Detail: detail, Seconds: time.Since(begin).Seconds()})
		}
	}
	return rep
}

var errSkip = errors.New("skipped")

func (t *run) fail(name string, d time.Duration, err error) {
	t.r.Checks = append(t.r.Checks, Check{Name: name, Result: Failed, Detail: err.Error(), Seconds: d.Seconds()})
	t.r.Result, t.r.Reason = Failed, name+": "+err.Error()
}

// own records an instance the test made (a rollback may bring back an id
// it destroyed: it is alive again).
func (t *run) own(id providers.InstanceID) {
	t.alive[id] = true
	for _, c := range t.created {
		if c == id {
			return
		}
	}
	t.created = append(t.created, id)
	t.r.Created = append(t.r.Created, "instance "+string(id))
}

func (t *run) create(key string) (providers.InstanceID, error) {
	id, err := t.p.Create(t.ctx, providers.CreateSpec{IdempotencyKey: key, Labels: map[string]string{"lifeboat.provider-test": t.o.Name}})
	if err != nil {
		return "", err
	}
	t.own(id)
	st, err := t.p.Inspect(t.ctx, id)
	if err == nil && st.State != providers.Running {
		err = fmt.Errorf("a new instance %s is %s, not running: %s", id, st.State, st.Detail)
	}
	return id, err
}

// write puts the test tree into id and checks it reads back.
func (t *run) write(id providers.InstanceID) (string, error) {
	t.src = filepath.Join(t.o.TempDir, "source")
	if err := writeTree(t.src, t.keep); err != nil {
		return "", err
	}
	if err := t.fx.Write(t.ctx, filepath.Join(t.src, "browser"), fixture.Options{}); err != nil {
		return "", err
	}
	if err := t.put(id, t.src); err != nil {
		return "", err
	}
	return t.compared(false), t.compare(id, false)
}

func (t *run) put(id providers.InstanceID, dir string) error {
	staging, err := t.p.WriteFiles(t.ctx, id, dir)
	if err != nil {
		return err
	}
	return t.p.Switch(t.ctx, id, staging)
}

func (t *run) capture(id providers.InstanceID) (string, error) {
	f, err := t.p.ReadFiles(t.ctx, id)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var res recovery.Result
	err = t.o.RepoLock(t.ctx, func() error {
		var err error
		res, err = t.o.Capturer.Capture(t.ctx, recovery.CaptureRequest{Dir: f.Dir(), Reason: recovery.ReasonManual, Time: time.Now(),
			Workspace: recovery.Workspace{ID: t.r.Workspace, Provider: t.o.Name, Instance: id}})
		return err
	})
	if err != nil {
		return "", err
	}
	t.r.Snapshot = res.Snapshot
	if !res.Complete {
		return res.Snapshot, fmt.Errorf("snapshot %s is partial: %d paths could not be read", res.Snapshot, res.Problems)
	}
	return res.Snapshot, nil
}

func (t *run) destroyConfirm(id providers.InstanceID) (string, error) {
	if err := t.p.Destroy(t.ctx, id); err != nil {
		return "", err
	}
	t.r.Destroyed = append(t.r.Destroyed, "instance "+string(id))
	t.alive[id] = false
	st, err := t.p.Inspect(t.ctx, id)
	if err != nil {
		return "", fmt.Errorf("inspect after destroy: %w", err)
	}
	if st.State != providers.Missing {
		return "", fmt.Errorf("instance %s is %s after Destroy, want missing: %s", id, st.State, st.Detail)
	}
	return "inspect: " + st.Detail, nil
}

func (t *run) restoreInto(snap string, id providers.InstanceID) error {
	dir := filepath.Join(t.o.TempDir, "restored")
	if err := t.o.RepoLock(t.ctx, func() error {
		_, err := t.o.Restorer.Restore(t.ctx, snap, dir)
		return err
	}); err != nil {
		return fmt.Errorf("restore of %s: %w", snap, err)
	}
	return t.put(id, dir)
}

// compared says what compare checks.
func (t *run) compared(restored bool) string {
	what := "files, modes, mtimes, symlinks"
	if t.keep.HardLinks {
		what += ", hard links"
	}
	if restored {
		return "matches the source (" + what + "; the browser session as a restore leaves it)"
	}
	return "matches the source (" + what + ", the browser profile byte for byte)"
}

// compare reads id back and says how it differs from the source. A tree
// restored from the repository holds the browser profile as capture left
// it (caches and locks out, the session marked as cleanly closed): it is
// checked with the fixture's own check; anything else holds it as
// written.
func (t *run) compare(id providers.InstanceID, restored bool) error {
	f, err := t.p.ReadFiles(t.ctx, id)
	if err != nil {
		return err
	}
	defer f.Close()
	skip := ""
	if restored {
		skip = "browser"
	}
	if err := compareTrees(t.src, f.Dir(), t.keep, skip); err != nil {
		return fmt.Errorf("instance %s: %w", id, err)
	}
	if restored {
		if err := t.fx.Check(t.ctx, filepath.Join(f.Dir(), "browser"), false); err != nil {
			return fmt.Errorf("instance %s: browser profile: %w", id, err)
		}
	}
	return nil
}

// cleanup destroys every instance and checkpoint the test made, on a
// context that outlives a cancelled test, and says what stayed.
func (t *run) cleanup() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 2*time.Minute)
	defer cancel()
	for _, id := range t.created {
		name := "instance " + string(id)
		if !t.alive[id] {
			continue
		}
		if err := t.p.Destroy(ctx, id); err != nil {
			t.r.Left = append(t.r.Left, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		t.r.Destroyed = append(t.r.Destroyed, name)
	}
	for _, cp := range t.cps {
		if err := t.p.DeleteCheckpoint(ctx, cp); err != nil {
			t.r.Left = append(t.r.Left, fmt.Sprintf("checkpoint %s (%v)", cp, err))
			continue
		}
		t.r.Destroyed = append(t.r.Destroyed, "checkpoint "+string(cp))
	}
	if len(t.r.Left) > 0 && t.r.Result == Passed {
		t.r.Result, t.r.Reason = Failed, "cleanup: could not remove what the test made"
	}
	_ = os.RemoveAll(filepath.Join(t.o.TempDir, "restored"))
}
