package recovery

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/recovery/statedb"
)

// fuzzRecord decodes data as a state store record of type T, as the store
// does (decodeRecord: a record that could not be written back is refused),
// and checks that what decodes encodes, and decodes again to the same
// encoding. It reports whether data decoded.
func fuzzRecord[T any](t *testing.T, data []byte) bool {
	t.Helper()
	var v T
	if decodeRecord(data, &v) != nil {
		return false
	}
	enc, err := json.Marshal(&v)
	if err != nil {
		t.Fatalf("a decoded %T does not encode: %v", v, err)
	}
	var again T
	if err := decodeRecord(enc, &again); err != nil {
		t.Fatalf("a decoded %T, encoded again, does not decode: %v\n%s", v, err, enc)
	}
	if enc2, _ := json.Marshal(&again); !bytes.Equal(enc, enc2) {
		t.Fatalf("%T encodings differ:\n%s\n%s", v, enc, enc2)
	}
	return true
}

// FuzzStoreRecords: the state store's records (workspaces, checkpoints,
// pending deletes, recovery operations, repair holds, process restarts)
// are JSON values in a bbolt file that outlives the process and every
// lifeboat version. Any bytes either decode as a record that encodes and
// decodes again to the same encoding, or are refused; through the store's
// own readers (a real store, the bytes put under a workspace, an operation
// and a pending delete) they give the record or an error naming it, never
// a panic.
func FuzzStoreRecords(f *testing.F) {
	now := time.Date(2026, 4, 1, 8, 0, 0, 0, time.UTC)
	code := 3
	cp := &Checkpoint{Snapshot: strings.Repeat("ab", 32), Time: now, Reason: ReasonPark, Instance: "i-1", Generation: 2, Files: 10, Bytes: 100,
		Processes: []ProcessRecord{{Command: []string{"agent", "--serve"}, Dir: "/w", Started: now, Ended: &now, ExitCode: &code, Tail: "ok"}}}
	for _, v := range []any{
		Workspace{ID: "bot-42", Provider: "local", Instance: "i-1", Generation: 2, Created: now, Settings: Settings{ParkInterval: time.Minute},
			LastGood: cp, Fingerprint: []byte{1, 2}, Native: &NativeCheckpoint{ID: "n-1", Time: now, Instance: "i-1", Snapshot: cp.Snapshot},
			Failures: 1, Recovery: []RecoveryRecord{{Time: now, Reason: ReasonPark, Attempt: 1, Error: "outage"}},
			InFlight: &InFlight{Started: now, Reason: ReasonManual, PID: 42}, Operation: "op-1"},
		*cp,
		PendingDelete{Workspace: "bot-42", Provider: "local", Checkpoint: "n-0", Since: now, Attempts: 2, LastError: "timeout"},
		Operation{ID: "op-1", Workspace: "bot-42", Checkpoint: cp.Snapshot, CheckpointTime: now, Provider: "local", OldInstance: "i-1",
			Generation: 2, State: OpFailed, Keep: providers.FileSupport{HardLinks: true}, RetryAt: now, Created: now, Updated: now,
			History: []Transition{{State: OpFailed, Time: now, Note: "n"}}},
		Hold{ID: "hold-1", Workspace: "bot-42", Operation: "op-1", Provider: "local", Replacement: "i-2", Lost: "i-1", Created: now,
			Stop: &StopReceipt{Time: now, Stopped: true}, Resolution: &Resolution{Outcome: HoldKept, Evidence: "ticket 7", Time: now}},
		ProcessRestart{Key: "k", Workspace: "bot-42", Index: 1, Command: []string{"agent"}, State: "done", Started: now, Finished: now},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"id":"w","created":"2026-04-01T08:00:00+24:00"}`))
	f.Add([]byte(`{"fingerprint":"not base64","generation":-1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"id":"w"} trailing`))
	s, err := OpenStore(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	s.db.(*statedb.Bolt).SetNoSync(true) // a fuzzing run writes the same keys again and again
	f.Fuzz(func(t *testing.T, data []byte) {
		ws := fuzzRecord[Workspace](t, data)
		fuzzRecord[Checkpoint](t, data)
		pend := fuzzRecord[PendingDelete](t, data)
		op := fuzzRecord[Operation](t, data)
		fuzzRecord[Hold](t, data)
		fuzzRecord[ProcessRestart](t, data)

		err := s.updateTx(func(tx stateTx) error {
			for _, kv := range []struct {
				kind statedb.Kind
				key  string
			}{{statedb.Workspaces, "fz"}, {statedb.Operations, "op-fz"}, {statedb.Pending, statedb.PendingKey("fz", "c")}} {
				if err := tx.Put(kv.kind, statedb.Record{Key: kv.key, Body: data}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Workspace("fz"); (err == nil) != ws || (err != nil && !strings.Contains(err.Error(), "fz")) {
			t.Fatalf("Workspace = %v; the record decodes: %v", err, ws)
		}
		if got, err := s.Workspaces(); (err == nil) != ws || (err == nil && len(got) != 1) {
			t.Fatalf("Workspaces = %d, %v; the record decodes: %v", len(got), err, ws)
		}
		if _, err := s.Operation("op-fz"); (err == nil) != op {
			t.Fatalf("Operation = %v; the record decodes: %v", err, op)
		}
		if got, err := s.Operations(""); (err == nil) != op || (err == nil && len(got) != 1) {
			t.Fatalf("Operations = %d, %v; the record decodes: %v", len(got), err, op)
		}
		if _, err := s.Pending(""); (err == nil) != pend {
			t.Fatalf("Pending = %v; the record decodes: %v", err, pend)
		}
	})
}
