package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"lifeboat/backend/local"
	"lifeboat/bench"
	"lifeboat/crypt"
	"lifeboat/providers"
	localprov "lifeboat/providers/local"
	"lifeboat/recovery"
	"lifeboat/repo"
)

// Step is one stage of the demo, reported as it finishes.
type Step struct {
	Name     string        `json:"step"`
	Detail   string        `json:"detail"`
	Duration time.Duration `json:"-"`
	Seconds  float64       `json:"seconds"`
	MBps     float64       `json:"mb_per_s,omitempty"`
}

// The demo's workspace id, the seed of its sample files and browser
// profile, and the idempotency key of its approval.
const (
	Workspace = "demo"
	Seed      = 1
	Approval  = "demo-approve-1"
)

// The demo's layout under its directory.
const (
	RepoDir      = "repo"      // the encrypted repository
	StateDir     = "state"     // the lifecycle's state store and recovery staging
	SandboxesDir = "sandboxes" // the local provider's root: one directory per sandbox
	ExpectedDir  = "expected"  // a copy of the project files the last checkpoint holds
)

// Run shows the whole job in dir (which it fills), on built-in defaults
// and the local provider: it makes a repository, a state store and a
// sandbox (an instance directory under the provider's root) holding a
// workspace of sample files (under "project") and a browser profile (the
// session fixture of Seed at bench.ProfileRel), checkpoints it through the
// lifecycle, changes it and checkpoints again, destroys the sandbox, has
// the recovery service detect the loss and show its offer, approves it
// with an idempotency key, waits for the restore into a replacement
// sandbox, and confirms that the files match what was captured, that the
// browser session came back, and that the workspace keeps its id on a new
// instance and generation. report is called after each step.
func Run(ctx context.Context, dir string, report func(Step)) error {
	password := []byte("lifeboat demo password")
	repoDir, stateDir := filepath.Join(dir, RepoDir), filepath.Join(dir, StateDir)
	ref := filepath.Join(dir, ExpectedDir)
	step := func(name, detail string, start time.Time, bytes uint64) {
		d := time.Since(start)
		s := Step{Name: name, Detail: detail, Duration: d, Seconds: d.Seconds()}
		if bytes > 0 && d > 0 {
			s.MBps = float64(bytes) / 1e6 / d.Seconds()
		}
		report(s)
	}

	start := time.Now()
	be, err := local.Create(repoDir)
	if err != nil {
		return err
	}
	defer be.Close()
	if _, err := repo.Init(ctx, be, password, repo.InitOptions{KDF: crypt.NewKDFParams(1, 8*1024, 1)}); err != nil {
		return err
	}
	r, err := repo.Open(ctx, be, password, repo.Options{CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	store, err := recovery.OpenStore(stateDir)
	if err != nil {
		return err
	}
	defer store.Close()
	prov := localprov.New(filepath.Join(dir, SandboxesDir))
	if err := os.MkdirAll(prov.Root(), 0o700); err != nil {
		return err
	}
	lc, err := recovery.New(recovery.Config{Store: store, Capturer: &recovery.RepoCapturer{Repo: r},
		Providers: []providers.Provider{prov}})
	if err != nil {
		return err
	}
	defer lc.Close()
	svc, err := recovery.NewService(recovery.ServiceConfig{Lifecycle: lc, Restorer: &recovery.RepoRestorer{Repo: r}, StateDir: stateDir})
	if err != nil {
		return err
	}
	defer svc.Close()
	step("init", fmt.Sprintf("encrypted repository at %s, state store at %s, local provider at %s", repoDir, stateDir, prov.Root()), start, 0)

	start = time.Now()
	inst, err := prov.Create(ctx, providers.CreateSpec{})
	if err != nil {
		return err
	}
	sandbox := filepath.Join(prov.Root(), string(inst))
	fx, err := bench.WriteProfileWorkspace(ctx, sandbox, Seed, bench.SmallScale)
	if err != nil {
		return err
	}
	if err := store.AddWorkspace(recovery.Workspace{ID: Workspace, Provider: prov.Name(), Instance: inst, Created: time.Now()}); err != nil {
		return err
	}
	if h, err := svc.Check(ctx, Workspace); err != nil || h.State != recovery.HealthOK {
		return fmt.Errorf("the new sandbox %s is not healthy: %+v %v", inst, h, err)
	}
	step("workspace", fmt.Sprintf("workspace %s in sandbox %s: sample files (source tree, dependencies, a model file, a log) and a signed-in browser profile at %s",
		Workspace, inst, bench.ProfileRel), start, 0)

	capture := func(name string) (recovery.Receipt, error) {
		start := time.Now()
		rc := lc.Capture(ctx, Workspace, recovery.ReasonManual)
		if rc.Outcome != recovery.Captured {
			return rc, fmt.Errorf("%s: %s: %s", name, rc.Outcome, rc.Error)
		}
		step(name, fmt.Sprintf("checkpoint %s: %d files, %.1f MB, %.1f MB new, verified; the last good checkpoint", short(rc.Snapshot),
			rc.Files, float64(rc.Bytes)/1e6, float64(rc.NewBytes)/1e6), start, rc.Bytes)
		return rc, nil
	}
	if _, err := capture("capture"); err != nil {
		return err
	}
	start = time.Now()
	n, err := bench.Churn(filepath.Join(sandbox, "project"), 2)
	if err != nil {
		return err
	}
	step("change", fmt.Sprintf("the agent changed %d paths", n), start, 0)
	cp, err := capture("capture again")
	if err != nil {
		return err
	}
	if err := bench.CopyTree(filepath.Join(sandbox, "project"), ref); err != nil { // what the check compares against
		return err
	}

	start = time.Now()
	if err := prov.Destroy(ctx, inst); err != nil {
		return err
	}
	step("lose", fmt.Sprintf("sandbox %s destroyed, with the workspace in it", inst), start, 0)

	start = time.Now()
	h, err := svc.Check(ctx, Workspace)
	if err != nil {
		return err
	}
	if h.State != recovery.HealthLost {
		return fmt.Errorf("after the sandbox was destroyed the check found %s (%s), want %s", h.State, h.Detail, recovery.HealthLost)
	}
	step("detect", fmt.Sprintf("workspace %s is %s: %s", Workspace, h.State, h.Action), start, 0)

	start = time.Now()
	offer, err := svc.Offer(ctx, Workspace)
	if err != nil {
		return err
	}
	if offer.Checkpoint != cp.Snapshot || !offer.BrowserProfile || offer.ProfileLocked {
		return fmt.Errorf("the offer names checkpoint %s (profiles %v, locked %v), want %s with its browser profile",
			short(offer.Checkpoint), offer.Profiles, offer.ProfileLocked, short(cp.Snapshot))
	}
	var lost []string
	for _, s := range offer.NotRecoverable {
		lost = append(lost, headline(s))
	}
	step("offer", fmt.Sprintf("checkpoint %s, %s old, %d files, %.1f MB, browser profile included (%s); cannot be recovered: %s",
		short(offer.Checkpoint), offer.Age.Round(time.Millisecond), offer.Files, float64(offer.Bytes)/1e6,
		strings.Join(offer.Profiles, ", "), strings.Join(lost, "; ")), start, 0)

	start = time.Now()
	op, err := svc.Approve(ctx, Workspace, offer.Checkpoint, Approval)
	if err != nil {
		return err
	}
	again, err := svc.Approve(ctx, Workspace, offer.Checkpoint, Approval)
	if err != nil {
		return err
	}
	if again.ID != op.ID {
		return fmt.Errorf("a repeated approval with key %s started operation %s besides %s", Approval, again.ID, op.ID)
	}
	step("approve", fmt.Sprintf("checkpoint %s approved with idempotency key %s: operation %s (a repeated approval returned the same operation)",
		short(offer.Checkpoint), Approval, op.ID), start, 0)

	start = time.Now()
	op, err = svc.Wait(ctx, op.ID)
	if err != nil {
		return err
	}
	if op.State != recovery.OpRecovered {
		return fmt.Errorf("recovery operation %s ended %s: %s", op.ID, op.State, op.Error)
	}
	var states []string
	for _, t := range op.History {
		states = append(states, string(t.State))
	}
	step("restore", fmt.Sprintf("replacement sandbox %s created, checkpoint restored and validated in staging, switched in (%s)",
		op.Replacement, strings.Join(states, " > ")), start, offer.Bytes)

	start = time.Now()
	st, err := svc.State(Workspace)
	if err != nil {
		return err
	}
	if st.Workspace != Workspace || st.Instance != op.Replacement || st.Instance == inst || st.Generation != op.Generation+1 ||
		st.Health == nil || st.Health.State != recovery.HealthOK {
		return fmt.Errorf("after recovery workspace %s is on instance %s generation %d (health %+v), want %s generation %d",
			st.Workspace, st.Instance, st.Generation, st.Health, op.Replacement, op.Generation+1)
	}
	replacement := filepath.Join(prov.Root(), string(st.Instance))
	diffs, err := bench.Compare(ref, filepath.Join(replacement, "project"))
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		return fmt.Errorf("restored workspace differs from what was captured: %v", diffs)
	}
	if err := fx.Check(ctx, filepath.Join(replacement, filepath.FromSlash(bench.ProfileRel)), true); err != nil {
		return fmt.Errorf("restored browser profile: %w", err)
	}
	sandboxes, err := Sandboxes(prov.Root())
	if err != nil {
		return err
	}
	if !slices.Equal(sandboxes, []string{string(st.Instance)}) {
		return fmt.Errorf("sandboxes after recovery: %v, want only the replacement %s", sandboxes, st.Instance)
	}
	step("verify", fmt.Sprintf("every file, mode, time and link matches what was captured; the browser session (cookies, logins, storage) is back; "+
		"workspace %s kept its id, now on instance %s (was %s), generation %d (was %d)",
		st.Workspace, st.Instance, inst, st.Generation, op.Generation), start, 0)
	return nil
}

// Sandboxes lists the instance directories under a local provider's root.
func Sandboxes(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range ents {
		if d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			out = append(out, d.Name())
		}
	}
	return out, nil
}

// headline is the part of an offer line before its explanation.
func headline(s string) string {
	if i := strings.IndexAny(s, ":("); i > 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}
