package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"lifeboat/internal/seedtest"
	"lifeboat/providers"
	"lifeboat/recovery/statedb"
)

// modelProv answers Inspect from a script and checks, at every Create,
// that the answer just given about the old instance was a confirmed
// Missing and that an approved operation is asking.
type modelProv struct {
	mu        sync.Mutex
	answer    func() (providers.Status, error)
	last      providers.State // what the last Inspect said; "" after an error
	approved  func() bool
	creates   int
	violation error
	createErr error
}

func (m *modelProv) Name() string { return "model" }
func (m *modelProv) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, Create: true}
}
func (m *modelProv) Inspect(_ context.Context, id providers.InstanceID) (providers.Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.answer()
	m.last = st.State
	if err != nil {
		m.last = ""
	}
	st.Instance = id
	return st, err
}
func (m *modelProv) Create(_ context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.creates++
	switch {
	case m.last != providers.Missing:
		m.violation = fmt.Errorf("create after the old instance was reported %q", m.last)
	case !m.approved():
		m.violation = errors.New("create without an approval")
	case spec.IdempotencyKey == "":
		m.violation = errors.New("create without an idempotency key")
	}
	return "", m.createErr
}
func (m *modelProv) Destroy(context.Context, providers.InstanceID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violation = errors.New("destroy called")
	return nil
}
func (m *modelProv) ReadFiles(context.Context, providers.InstanceID) (providers.Files, error) {
	return nil, &providers.Error{Provider: "model", Op: "read files", Kind: providers.KindUnavailable}
}
func (m *modelProv) WriteFiles(context.Context, providers.InstanceID, string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violation = errors.New("write files called")
	return "", nil
}
func (m *modelProv) Switch(context.Context, providers.InstanceID, string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violation = errors.New("switch called")
	return nil
}
func (m *modelProv) Exec(context.Context, providers.InstanceID, []string, io.Reader) (providers.ExecResult, error) {
	return providers.ExecResult{}, nil
}
func (m *modelProv) Checkpoint(context.Context, providers.InstanceID) (providers.CheckpointID, error) {
	return "", &providers.Error{Provider: "model", Op: "checkpoint", Kind: providers.KindUnsupported}
}
func (m *modelProv) Rollback(context.Context, providers.InstanceID, providers.CheckpointID) (providers.InstanceID, error) {
	return "", &providers.Error{Provider: "model", Op: "rollback", Kind: providers.KindUnsupported}
}
func (m *modelProv) DeleteCheckpoint(context.Context, providers.CheckpointID) error { return nil }

// nopRestorer describes every checkpoint as files only.
type nopRestorer struct{}

func (nopRestorer) Describe(context.Context, string) (SnapshotInfo, error) {
	return SnapshotInfo{}, nil
}
func (nopRestorer) Check(context.Context, string) error { return nil }
func (nopRestorer) Restore(context.Context, string, string) (RestoreInfo, error) {
	return RestoreInfo{}, errors.New("not in the model")
}

// TestModelNoCreateWithoutConfirmedMissing runs thousands of random
// sequences of provider answers (running, stopped, missing, unavailable,
// unauthorized, rate limited, conflict), checks on use and on schedule,
// approvals with right and wrong checkpoints and keys, and resumes. It
// checks after every step that the health state is the one the last
// answer gives, that an approval is accepted only for a workspace whose
// last answer was a confirmed Missing, and (in the provider) that Create is
// called only right after a confirmed Missing, for an approved operation.
// Nothing is ever destroyed, written or switched.
func TestModelNoCreateWithoutConfirmedMissing(t *testing.T) {
	seed := seedtest.Seed(t)
	rng := seedtest.New(seed)
	sequences, steps := 2000, 25
	if testing.Short() {
		sequences = 200
	}
	clock := newFakeClock()
	var approved bool
	m := &modelProv{approved: func() bool { return approved }}
	ctx := context.Background()
	dir := t.TempDir()
	store, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	store.db.(*statedb.Bolt).SetNoSync(true) // thousands of transactions; durability is not what is tested here
	lc, err := New(Config{Store: store, Capturer: &scripted{}, Providers: []providers.Provider{m}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	svc, err := NewService(ServiceConfig{Lifecycle: lc, Restorer: nopRestorer{}, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	// forget removes a finished sequence's workspace and operations (no
	// driver runs for them), so sequences stay independent.
	forget := func(ws string) {
		err := store.updateTx(func(tx stateTx) error {
			var ids []string
			_ = tx.List(statedb.Operations, func(k string, v []byte) error {
				if op, _ := getOp(tx, k); op != nil && op.Workspace == ws {
					ids = append(ids, k)
				}
				return nil
			})
			for _, k := range ids {
				if err := tx.Delete(statedb.Operations, k); err != nil {
					return err
				}
			}
			return tx.Delete(statedb.Workspaces, ws)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	answers := []struct {
		st   providers.State
		kind providers.Kind
		want HealthState
	}{
		{providers.Running, "", HealthOK}, {providers.Stopped, "", HealthOK}, {providers.Missing, "", HealthLost},
		{"", providers.KindUnavailable, HealthUnreachable}, {"", providers.KindUnauthorized, HealthAuthFailed},
		{"", providers.KindRateLimited, HealthRateLimited}, {"", providers.KindConflict, HealthCheckFailed},
	}
	// recorded is the answer behind the health state stored for ws: a
	// failed operation leaves the workspace lost (its instance was
	// confirmed missing) or ok (it came back).
	recorded := func(store *Store, ws string, cur int) int {
		w, err := store.Workspace(ws)
		if err != nil || w.Health == nil {
			return -1
		}
		return slicesIndex(answers, w.Health.State, cur)
	}
	for seq := range sequences {
		ws := fmt.Sprintf("ws%d", seq)
		if err := store.AddWorkspace(Workspace{ID: ws, Provider: "model", Instance: "old"}); err != nil {
			t.Fatal(err)
		}
		snap := fmt.Sprintf("%064x", seq)
		if seq%10 != 0 { // some workspaces were lost before their first checkpoint
			err := store.update(ws, func(_ stateTx, w *Workspace) error {
				w.LastGood = &Checkpoint{Snapshot: snap, Time: clock.Now()}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var cur int      // index into answers
		lastSeen := -1   // the answer the last Check recorded
		var opID string  // the running operation
		approved = false // an operation of this workspace is approved and not ended
		m.mu.Lock()
		m.createErr = &providers.Error{Provider: "model", Op: "create", Kind: []providers.Kind{providers.KindInvalid, providers.KindUnavailable}[rng.IntN(2)]}
		m.mu.Unlock()
		m.answer = func() (providers.Status, error) {
			a := answers[cur]
			if a.kind != "" {
				return providers.Status{}, &providers.Error{Provider: "model", Op: "inspect", Kind: a.kind, RetryAfter: time.Duration(rng.IntN(3)) * time.Minute}
			}
			return providers.Status{State: a.st}, nil
		}
		for step := range steps {
			switch r := rng.IntN(10); {
			case r < 3:
				cur = rng.IntN(len(answers))
			case r < 6:
				h, err := svc.Check(ctx, ws)
				if err != nil {
					t.Fatalf("seed %d seq %d step %d: check: %v", seed, seq, step, err)
				}
				if opID == "" {
					if h.State != answers[cur].want {
						t.Fatalf("seed %d seq %d step %d: answer %+v gave health %s", seed, seq, step, answers[cur], h.State)
					}
					lastSeen = cur
				} else if h.State != HealthRecovering {
					t.Fatalf("seed %d seq %d step %d: health %s while operation %s runs", seed, seq, step, h.State, opID)
				}
			case r < 8:
				cp := snap
				if rng.IntN(4) == 0 {
					cp = fmt.Sprintf("%064x", seq+1)
				}
				key := fmt.Sprintf("%s-k%d", ws, rng.IntN(3))
				wasApproved := approved
				approved = true // the provider may see Create from here on
				op, err := svc.Approve(ctx, ws, cp, key)
				if err != nil {
					approved = wasApproved
					continue
				}
				if opID == "" && op.State == OpApproved {
					if lastSeen < 0 || answers[lastSeen].st != providers.Missing || cp != snap || seq%10 == 0 {
						t.Fatalf("seed %d seq %d step %d: approval accepted after answer %d, checkpoint %s", seed, seq, step, lastSeen, cp)
					}
					opID = op.ID
				}
				if opID != "" {
					op, err = svc.Wait(ctx, opID)
					if err != nil {
						t.Fatal(err)
					}
					if op.State.Terminal() {
						opID, approved, lastSeen = "", false, recorded(store, ws, cur)
					}
				}
			default:
				clock.Advance(time.Duration(rng.IntN(4)) * time.Minute)
				svc.CheckDue(ctx)
				if opID != "" {
					op, err := svc.Wait(ctx, opID)
					if err != nil {
						t.Fatal(err)
					}
					if op.State.Terminal() {
						opID, approved = "", false
					}
				}
				if opID == "" {
					lastSeen = recorded(store, ws, cur)
				}
			}
			m.mu.Lock()
			v := m.violation
			m.mu.Unlock()
			if v != nil {
				t.Fatalf("seed %d seq %d step %d: %v", seed, seq, step, v)
			}
		}
		if opID != "" {
			if _, err := svc.Wait(ctx, opID); err != nil {
				t.Fatal(err)
			}
		}
		forget(ws)
	}
	t.Logf("%d sequences of %d steps, %d creates, all after a confirmed missing and an approval", sequences, steps, m.creates)
}

// slicesIndex maps a recorded health state back to the answer that gives
// it (the current answer when it fits: several answers give HealthOK).
func slicesIndex(answers []struct {
	st   providers.State
	kind providers.Kind
	want HealthState
}, h HealthState, cur int) int {
	if answers[cur].want == h {
		return cur
	}
	for i, a := range answers {
		if a.want == h {
			return i
		}
	}
	return -1
}
