package recovery

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"lifeboat/providers"
)

// The store's records, on every implementation: workspaces by id, the
// checkpoint history bounded and ordered by time, pending deletes, and a
// workspace removal that takes its history and pending work with it.
func TestStoreRecords(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		s, err := openTestStore(t, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, id := range []string{"b-2", "a-1", "B-3"} {
			if err := s.AddWorkspace(Workspace{ID: id, Provider: "local", Instance: "i"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddWorkspace(Workspace{ID: "a-1", Provider: "local", Instance: "j"}); !errors.Is(err, ErrWorkspaceExists) {
			t.Fatalf("duplicate: %v", err)
		}
		if _, err := s.Workspace("nope"); !errors.Is(err, ErrUnknownWorkspace) {
			t.Fatalf("unknown: %v", err)
		}
		wss, err := s.Workspaces()
		if err != nil || len(wss) != 3 || wss[0].ID != "B-3" || wss[1].ID != "a-1" || wss[2].ID != "b-2" {
			t.Fatalf("Workspaces (bytewise order) = %+v, %v", wss, err)
		}
		base := time.Date(2026, 4, 1, 8, 0, 0, 0, time.UTC)
		for i := range maxCheckpoints + 5 {
			cp := &Checkpoint{Snapshot: fmt.Sprintf("%064x", i), Time: base.Add(time.Duration(i) * time.Minute), Reason: ReasonPeriodic}
			if err := s.update("a-1", func(tx stateTx, w *Workspace) error {
				w.LastGood = cp
				return putCheckpoint(tx, w.ID, cp)
			}); err != nil {
				t.Fatal(err)
			}
		}
		hist, err := s.Checkpoints("a-1")
		// The oldest beyond the bound go (bbolt counts the keys committed
		// before the transaction, so it keeps one more).
		if err != nil || len(hist) < maxCheckpoints || len(hist) > maxCheckpoints+1 {
			t.Fatalf("history: %d, %v", len(hist), err)
		}
		for i := range hist {
			if want := fmt.Sprintf("%064x", maxCheckpoints+5-len(hist)+i); hist[i].Snapshot != want {
				t.Fatalf("history[%d] = %s, want %s", i, hist[i].Snapshot[60:], want[60:])
			}
		}
		for _, p := range []PendingDelete{{Workspace: "a-1", Checkpoint: "n1"}, {Workspace: "b-2", Checkpoint: "n2"}, {Workspace: "a-1", Checkpoint: "n0"}} {
			if err := s.putPending(p); err != nil {
				t.Fatal(err)
			}
		}
		if p, err := s.Pending("a-1"); err != nil || len(p) != 2 || p[0].Checkpoint != providers.CheckpointID("n0") {
			t.Fatalf("pending: %+v %v", p, err)
		}
		if err := s.removePending(PendingDelete{Workspace: "a-1", Checkpoint: "n0"}); err != nil {
			t.Fatal(err)
		}
		if err := s.removeWorkspace("a-1", 1); !errors.Is(err, ErrStaleGeneration) {
			t.Fatalf("remove at a generation it is not at: %v", err)
		}
		if err := s.removeWorkspace("a-1", 0); err != nil {
			t.Fatal(err)
		}
		hist, _ = s.Checkpoints("a-1")
		all, _ := s.Pending("")
		if _, err := s.Workspace("a-1"); !errors.Is(err, ErrUnknownWorkspace) || len(hist) != 0 || len(all) != 1 || all[0].Workspace != "b-2" {
			t.Fatalf("after removal: %v, %d checkpoints, pending %+v", err, len(hist), all)
		}
	})
}
