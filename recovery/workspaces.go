package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lifeboat/providers"
)

// ErrUnknownProvider: a workspace names a provider instance this lifeboat
// has not configured.
var ErrUnknownProvider = errors.New("unknown provider instance")

// ErrInvalidChange: a workspace change that cannot be made as asked.
var ErrInvalidChange = errors.New("invalid workspace change")

// ErrInstanceMissing: a workspace was registered (or moved) onto an
// instance its provider says does not exist.
var ErrInstanceMissing = errors.New("instance does not exist")

// NewWorkspace is what registering a workspace takes.
type NewWorkspace struct {
	ID       string
	Provider string               // a configured provider instance name
	Instance providers.InstanceID // the provider's native id; default ID
	Settings Settings
}

// AddWorkspace registers a workspace while the lifecycle runs. Its id
// must be new (checked first), its provider instance must be configured
// and must report the instance as existing (running or stopped): nothing
// is created.
func (l *Lifecycle) AddWorkspace(ctx context.Context, nw NewWorkspace) (Workspace, error) {
	if err := ValidWorkspaceID(nw.ID); err != nil {
		return Workspace{}, err
	}
	if nw.Instance == "" {
		nw.Instance = providers.InstanceID(nw.ID)
	}
	if err := validSettings(nw.Settings); err != nil {
		return Workspace{}, fmt.Errorf("%w: workspace %s: %w", ErrInvalidChange, nw.ID, err)
	}
	if err := l.store.CheckNewID(nw.ID); err != nil {
		return Workspace{}, err
	}
	w := Workspace{ID: nw.ID, Provider: nw.Provider, Instance: nw.Instance, Created: l.clock.Now().UTC(), Settings: nw.Settings}
	if err := l.needInstance(ctx, w); err != nil {
		return Workspace{}, err
	}
	if err := l.store.AddWorkspace(w); err != nil {
		return Workspace{}, err
	}
	l.wake()
	return w, nil
}

// needInstance checks that w's provider is configured and reports w's
// instance as existing.
func (l *Lifecycle) needInstance(ctx context.Context, w Workspace) error {
	p, err := l.provider(w)
	if err != nil {
		return err
	}
	st, err := p.Inspect(ctx, w.Instance)
	if err != nil {
		return fmt.Errorf("workspace %s: checking instance %s of provider %s: %w", w.ID, w.Instance, w.Provider, err)
	}
	if st.State == providers.Missing {
		return fmt.Errorf("%w: workspace %s: provider %s has no instance %q (%s); register the instance the sandbox runs on now",
			ErrInstanceMissing, w.ID, w.Provider, w.Instance, st.Detail)
	}
	return nil
}

func validSettings(s Settings) error {
	if s.ParkInterval < 0 || s.PeriodicInterval < 0 {
		return errors.New("intervals must not be negative (0 means the server's default)")
	}
	return nil
}

// WorkspaceChange is what ChangeWorkspace may change; nil fields stay.
type WorkspaceChange struct {
	// Instance is the sandbox's new native id after a normal wake (the
	// provider gave the same workspace a new instance). The generation
	// moves on, so requests for the old instance are refused, and the
	// next inspection and periodic round look at the new one.
	Instance *providers.InstanceID
	// ParkInterval and PeriodicInterval: 0 returns to the default.
	ParkInterval, PeriodicInterval *time.Duration
}

// ChangeWorkspace changes a workspace under its lease (it waits for a
// capture or restart in flight). A new instance is refused while a
// recovery operation runs, and must exist at its provider.
func (l *Lifecycle) ChangeWorkspace(ctx context.Context, ws string, c WorkspaceChange) (Workspace, error) {
	release, err := l.lease(ctx, ws)
	if err != nil {
		return Workspace{}, err
	}
	defer release()
	cur, err := l.store.Workspace(ws)
	if err != nil {
		return Workspace{}, err
	}
	if c.Instance != nil && *c.Instance != cur.Instance {
		if err := guard(cur); err != nil {
			return Workspace{}, fmt.Errorf("change instance of %s: %w", ws, err)
		}
		if *c.Instance == "" {
			return Workspace{}, fmt.Errorf("%w: workspace %s: the instance id must not be empty", ErrInvalidChange, ws)
		}
		next := cur
		next.Instance = *c.Instance
		if err := l.needInstance(ctx, next); err != nil {
			return Workspace{}, err
		}
	}
	var out Workspace
	err = l.store.update(ws, func(tx stateTx, w *Workspace) error {
		if c.Instance != nil && *c.Instance != w.Instance {
			if err := guard(*w); err != nil {
				return err
			}
			if err := retireNative(tx, w, l.clock.Now()); err != nil {
				return err
			}
			w.Instance = *c.Instance
			w.Generation++
			// What was learnt about the old instance says nothing about
			// the new one: inspect it afresh, capture it afresh.
			w.Fingerprint, w.Health = nil, nil
		}
		if c.ParkInterval != nil {
			w.Settings.ParkInterval = *c.ParkInterval
		}
		if c.PeriodicInterval != nil {
			w.Settings.PeriodicInterval = *c.PeriodicInterval
		}
		if err := validSettings(w.Settings); err != nil {
			return fmt.Errorf("%w: workspace %s: %w", ErrInvalidChange, ws, err)
		}
		out = *w
		return nil
	})
	if err == nil {
		l.SyncHold(ctx, ws)
		l.wake()
	}
	return out, err
}

// Removed says what RemoveWorkspace did.
type Removed struct {
	Workspace string `json:"workspace"`
	// Forgotten counts the snapshots removed (only when asked); their
	// data is freed by the next prune.
	Forgotten int `json:"forgotten"`
	// NativeDeleted lists the native checkpoints deleted (only when asked).
	NativeDeleted []providers.CheckpointID `json:"native_deleted"`
	// Kept says what stays, for people.
	Kept string `json:"kept"`
}

// RemoveWorkspace stops managing workspace ws (under its lease): its
// record, checkpoint history and pending work leave the state store and
// its holds leave the repository. Its snapshots stay in the repository,
// under the retention policy like any workspace's (the newest complete one
// always stays), unless forget is set: then its native checkpoints are
// deleted first (a failure removes nothing) and its snapshots are
// forgotten once the record is gone (the next prune frees their data).
// Refused while a recovery operation runs.
func (l *Lifecycle) RemoveWorkspace(ctx context.Context, ws string, forget bool) (Removed, error) {
	release, err := l.lease(ctx, ws)
	if err != nil {
		return Removed{}, err
	}
	defer release()
	w, err := l.store.Workspace(ws)
	if err != nil {
		return Removed{}, err
	}
	if err := guard(w); err != nil {
		return Removed{}, fmt.Errorf("remove %s: %w", ws, err)
	}
	out := Removed{Workspace: ws, NativeDeleted: []providers.CheckpointID{},
		Kept: "its snapshots stay in the repository under the retention policy (the newest complete one always stays)"}
	if forget {
		if err := l.deleteNatives(ctx, w, &out); err != nil {
			return out, err
		}
	}
	if err := l.store.removeWorkspace(ws, w.Generation); err != nil {
		return out, err
	}
	l.procs.drop(ws)
	l.fps.drop(ws)
	if l.cfg.Holds == nil {
		return out, nil
	}
	// Under the workspace's hold lock: a hold being written from the
	// record read before the removal is done before this releases it.
	err = l.repoWork(ctx, func() error {
		defer l.holds.Lock(ws)()
		if err := l.cfg.Holds.Release(ctx, ws); err != nil {
			return fmt.Errorf("workspace %s removed, but its holds in the repository could not be removed (the server's next check removes them): %w", ws, err)
		}
		if !forget {
			return nil
		}
		out.Kept = "nothing: its snapshots were forgotten (the next prune frees their data) and its native checkpoints deleted"
		n, err := l.cfg.Holds.ForgetAll(ctx, ws)
		out.Forgotten = n
		if err != nil {
			return fmt.Errorf("workspace %s removed, but forgetting its snapshots failed after %d (forget the rest with `lifeboat forget --workspace %s`): %w", ws, n, ws, err)
		}
		return nil
	})
	return out, err
}

// deleteNatives deletes w's native checkpoints, stored and pending.
func (l *Lifecycle) deleteNatives(ctx context.Context, w Workspace, out *Removed) error {
	pending, err := l.store.Pending(w.ID)
	if err != nil {
		return err
	}
	var cps []providers.CheckpointID
	if w.Native != nil {
		cps = append(cps, w.Native.ID)
	}
	for _, pd := range pending {
		cps = append(cps, pd.Checkpoint)
	}
	if len(cps) == 0 {
		return nil
	}
	p, err := l.provider(w)
	if err != nil {
		return err
	}
	for _, cp := range cps {
		if err := p.DeleteCheckpoint(ctx, cp); err != nil {
			return fmt.Errorf("remove %s: deleting native checkpoint %s: %w; nothing was removed from the state store, try again", w.ID, cp, err)
		}
		out.NativeDeleted = append(out.NativeDeleted, cp)
	}
	return nil
}

// Workspaces lists the registered workspaces, sorted by id.
func (l *Lifecycle) Workspaces() ([]Workspace, error) { return l.store.Workspaces() }

// Workspace returns the record of workspace id (ErrUnknownWorkspace when
// none is registered).
func (l *Lifecycle) Workspace(id string) (Workspace, error) { return l.store.Workspace(id) }

// Checkpoints returns the checkpoint history of workspace ws, oldest first.
func (l *Lifecycle) Checkpoints(ws string) ([]Checkpoint, error) { return l.store.Checkpoints(ws) }
