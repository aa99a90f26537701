package recovery

import (
	"errors"
	"strings"
	"testing"

	"lifeboat/recovery/statedb"
)

func TestStoreReopenAndValidate(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddWorkspace(Workspace{ID: "bot-1", Provider: "local", Instance: "i"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddWorkspace(Workspace{ID: "bot-1", Provider: "local", Instance: "j"}); !errors.Is(err, ErrWorkspaceExists) {
		t.Fatalf("duplicate: %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", string(make([]byte, 200))} {
		if err := s.AddWorkspace(Workspace{ID: bad, Provider: "local", Instance: "i"}); !errors.Is(err, ErrBadWorkspaceID) {
			t.Fatalf("id %q: %v", bad, err)
		}
	}
	if err := s.AddWorkspace(Workspace{ID: "bot-2"}); err == nil {
		t.Fatal("a workspace without provider and instance was accepted")
	}
	if _, err := OpenStore(dir); !errors.Is(err, ErrStoreBusy) {
		t.Fatalf("second open while held: %v", err)
	}
	salt := s.db.Salt()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Workspace("bot-1")
	if err != nil || w.Instance != "i" || string(s.db.Salt()) != string(salt) {
		t.Fatalf("after reopen: %+v %v", w, err)
	}
	if _, err := s.Workspace("bot-9"); !errors.Is(err, ErrUnknownWorkspace) {
		t.Fatalf("unknown: %v", err)
	}
	// A store from a newer lifeboat is refused, not rewritten.
	if err := s.db.(*statedb.Bolt).SetSchema(StoreSchema + 1); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := OpenStore(dir); !errors.Is(err, ErrStoreNewer) {
		t.Fatalf("newer schema: %v", err)
	}
}

// A record that does not decode fails the listing of its kind with an
// error naming the record.
func TestStoreListingNamesUndecodableRecord(t *testing.T) {
	for _, c := range []struct {
		kind statedb.Kind
		list func(s *Store) error
		want string
	}{
		{statedb.Workspaces, func(s *Store) error { _, err := s.Workspaces(); return err }, "state store: workspace bot-1 does not decode: "},
		{statedb.Operations, func(s *Store) error { _, err := s.Operations(""); return err }, "state store: operation bot-1 does not decode: "},
		{statedb.Pending, func(s *Store) error { _, err := s.Pending(""); return err }, `state store: pending record "bot-1" does not decode: `},
	} {
		s, err := OpenStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.updateTx(func(tx stateTx) error {
			return tx.Put(c.kind, statedb.Record{Key: "bot-1", Body: []byte("{")})
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.list(s); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("listing a kind holding an undecodable record: %v, want an error starting %q", err, c.want)
		}
	}
}
