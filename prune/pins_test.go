package prune

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
)

func countPins(t *testing.T, r *repo.Repository) int {
	t.Helper()
	n := 0
	if err := r.ListObjects(t.Context(), crypt.KindPin, func(blob.ID) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustHeld(t *testing.T, ps Pins, ws string, id blob.ID, wantWhy string) {
	t.Helper()
	why, ok := ps.Held(ws, id)
	if !ok || why != wantWhy {
		t.Fatalf("Held(%q, %s) = %q, %v; want %q", ws, id.Short(), why, ok, wantWhy)
	}
}

func mustNotHeld(t *testing.T, ps Pins, ws string, id blob.ID) {
	t.Helper()
	if why, ok := ps.Held(ws, id); ok {
		t.Fatalf("Held(%q, %s) = %q, want not held", ws, id.Short(), why)
	}
}

func load(t *testing.T, r *repo.Repository) Pins {
	t.Helper()
	ps, err := LoadPins(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestPinsRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ctx := t.Context()
	s1, s2 := blob.ID{1}, blob.ID{2}
	if ps := load(t, r); len(ps.Objects) != 0 {
		t.Fatalf("pins in a new repository: %+v", ps.Objects)
	}
	p, err := SetPin(ctx, r, Pin{Workspace: "w", Snapshots: []PinnedSnapshot{{ID: s1, Why: "last good checkpoint of the lifecycle"}}}, t0)
	if err != nil || p.ID.IsNull() || p.Version != PinVersion || !p.Set.Equal(t0) {
		t.Fatalf("SetPin: %+v, %v", p, err)
	}
	ps := load(t, r)
	if len(ps.Objects) != 1 || ps.Objects[0].ID != p.ID || ps.Objects[0].Workspace != "w" || !ps.Objects[0].Set.Equal(t0) {
		t.Fatalf("loaded %+v", ps.Objects)
	}
	mustHeld(t, ps, "w", s1, "last good checkpoint of the lifecycle")
	mustHeld(t, ps, "other", s1, "last good checkpoint of the lifecycle") // an id is held whatever workspace asks
	mustNotHeld(t, ps, "w", s2)

	// The lifecycle moves the last good checkpoint and an offer names s1.
	_, err = SetPin(ctx, r, Pin{Workspace: "w", Snapshots: []PinnedSnapshot{
		{ID: s2, Why: "last good checkpoint of the lifecycle"}, {ID: s1, Why: "recovery operation op-1 approved it"}}}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n := countPins(t, r); n != 1 {
		t.Fatalf("%d pin objects after a second SetPin, want 1 (the old one removed)", n)
	}
	ps = load(t, r)
	mustHeld(t, ps, "w", s2, "last good checkpoint of the lifecycle")
	mustHeld(t, ps, "w", s1, "recovery operation op-1 approved it")

	// Another workspace is lost with an offer open: all of it is held.
	if _, err := SetPin(ctx, r, Pin{Workspace: "v", All: true, AllWhy: "the workspace is lost and a recovery offer is open"}, t0); err != nil {
		t.Fatal(err)
	}
	ps = load(t, r)
	mustHeld(t, ps, "v", blob.ID{9}, "the workspace is lost and a recovery offer is open")
	mustNotHeld(t, ps, "w", blob.ID{9})
	if all := ps.HoldsAll(); len(all) != 1 || all[0] != "v" {
		t.Fatalf("HoldsAll %v", all)
	}

	if n, err := RemovePins(ctx, r, "w"); err != nil || n != 1 {
		t.Fatalf("RemovePins: %d, %v", n, err)
	}
	ps = load(t, r)
	mustNotHeld(t, ps, "w", s1)
	mustNotHeld(t, ps, "w", s2)
	mustHeld(t, ps, "v", s1, "the workspace is lost and a recovery offer is open")

	for _, bad := range []Pin{{}, {Workspace: "w", Snapshots: []PinnedSnapshot{{Why: "null"}}}} {
		if _, err := SetPin(ctx, r, bad, t0); err == nil {
			t.Errorf("SetPin(%+v) accepted", bad)
		}
	}
}

// The pin's JSON is part of the format (format.md 11.5): a change must show.
func TestPinFormat(t *testing.T) {
	t.Parallel()
	p := Pin{Version: 1, Workspace: "w", Snapshots: []PinnedSnapshot{{ID: blob.ID{0xab}, Why: "last good checkpoint of the lifecycle"}},
		All: true, AllWhy: "a recovery runs", Set: t0, ID: blob.ID{1}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"workspace":"w","snapshots":[{"id":"ab` + strings.Repeat("0", 62) +
		`","why":"last good checkpoint of the lifecycle"}],"all":true,"all_why":"a recovery runs","set":"2026-03-10T12:00:00Z"}`
	if string(b) != want {
		t.Fatalf("pin JSON\n got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(Pin{Version: 1, Workspace: "w", Set: t0}); string(b) != `{"version":1,"workspace":"w","set":"2026-03-10T12:00:00Z"}` {
		t.Fatalf("empty pin JSON %s", b)
	}
}

// A crash between SetPin's write and its removal leaves two pins of one
// workspace: both hold, and the next SetPin removes both.
func TestPinsUnionAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ctx := t.Context()
	s1, s2, s3 := blob.ID{1}, blob.ID{2}, blob.ID{3}
	for _, p := range []Pin{
		{Version: 1, Workspace: "w", Snapshots: []PinnedSnapshot{{ID: s1, Why: "old last good"}}, Set: t0},
		{Version: 1, Workspace: "w", Snapshots: []PinnedSnapshot{{ID: s2, Why: "new last good"}}, Set: t0.Add(time.Minute)},
	} {
		b, _ := json.Marshal(p)
		if _, err := r.SaveObject(ctx, crypt.KindPin, blob.Workspace, b); err != nil {
			t.Fatal(err)
		}
	}
	ps := load(t, r)
	if len(ps.Objects) != 2 {
		t.Fatalf("%d pins", len(ps.Objects))
	}
	mustHeld(t, ps, "w", s1, "old last good")
	mustHeld(t, ps, "w", s2, "new last good")
	if _, err := SetPin(ctx, r, Pin{Workspace: "w", Snapshots: []PinnedSnapshot{{ID: s3, Why: "newer"}, {ID: s1}}}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ps = load(t, r)
	if len(ps.Objects) != 1 {
		t.Fatalf("%d pins after SetPin, want 1", len(ps.Objects))
	}
	mustNotHeld(t, ps, "w", s2)
	mustHeld(t, ps, "w", s1, "pinned by the lifecycle") // no why given
	if ids := ps.Pinned(); len(ids) != 2 || ids[0] != s1 || ids[1] != s3 {
		t.Fatalf("Pinned %v", ids)
	}
}

// A pin object that does not load stops LoadPins with its name: forget
// and prune must not run without knowing what it holds.
func TestPinDamagedRefused(t *testing.T) {
	t.Parallel()
	cases := map[string][]byte{
		"not json":      []byte("not json"),
		"unknown field": []byte(`{"version":1,"workspace":"w","set":"2026-03-10T12:00:00Z","hold_nothing":true}`),
		"newer version": []byte(`{"version":2,"workspace":"w","set":"2026-03-10T12:00:00Z"}`),
		"no workspace":  []byte(`{"version":1,"workspace":"","set":"2026-03-10T12:00:00Z"}`),
		"null id":       []byte(`{"version":1,"workspace":"w","snapshots":[{"id":"` + strings.Repeat("0", 64) + `","why":"x"}],"set":"2026-03-10T12:00:00Z"}`),
		// Times Go decodes but cannot write back, and bytes after the object.
		"offset +24:00":     []byte(`{"version":1,"workspace":"w","set":"2026-03-10T12:00:00+24:00"}`),
		"year 10000 in UTC": []byte(`{"version":1,"workspace":"w","set":"9999-12-31T23:00:00-05:00"}`),
		"a second object":   []byte(`{"version":1,"workspace":"w","set":"2026-03-10T12:00:00Z"} {}`),
		"a stray brace":     []byte(`{"version":1,"workspace":"w","set":"2026-03-10T12:00:00Z"}}`),
	}
	for name, plain := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			r := e.open(nil)
			good, err := SetPin(t.Context(), r, Pin{Workspace: "v", Snapshots: []PinnedSnapshot{{ID: blob.ID{1}, Why: "x"}}}, t0)
			if err != nil {
				t.Fatal(err)
			}
			id, err := r.SaveObject(t.Context(), crypt.KindPin, blob.Workspace, plain)
			if err != nil {
				t.Fatal(err)
			}
			_, err = LoadPins(t.Context(), r)
			if err == nil || !strings.Contains(err.Error(), "pins/"+id.String()) || strings.Contains(err.Error(), good.ID.String()) {
				t.Fatalf("LoadPins with a bad pin: %v", err)
			}
			// SetPin of another workspace leaves it (it cannot tell whose it is).
			if _, err := SetPin(t.Context(), r, Pin{Workspace: "w"}, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Backend().Stat(t.Context(), backend.Handle{Type: backend.Pin, Name: id.String()}); err != nil {
				t.Fatalf("the unreadable pin was removed: %v", err)
			}
		})
	}
	// A pin sealed in the sensitive tier is refused too.
	e := newEnv(t)
	r := e.open(nil)
	b, _ := json.Marshal(Pin{Version: 1, Workspace: "w", Set: t0})
	id, err := r.SaveObject(t.Context(), crypt.KindPin, blob.Sensitive, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPins(t.Context(), r); err == nil || !strings.Contains(err.Error(), id.String()) || !strings.Contains(err.Error(), "sensitive") {
		t.Fatalf("sensitive pin: %v", err)
	}
	// A damaged file (not matching its name) is refused and names the file.
	if err := r.Backend().Save(t.Context(), backend.Handle{Type: backend.Pin, Name: strings.Repeat("ab", 32)}, []byte("junk")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPins(t.Context(), r); !errors.Is(err, repo.ErrCorrupt) || !strings.Contains(err.Error(), strings.Repeat("ab", 32)) {
		t.Fatalf("damaged pin file: %v", err)
	}
}

// packCount counts stored pack files.
func packCount(t *testing.T, r *repo.Repository) int {
	t.Helper()
	n := 0
	if err := r.Backend().List(t.Context(), backend.Pack, func(backend.FileInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// prune --forget-damaged never forgets a snapshot a pin holds: it stops
// before deleting anything, at the plan or (for a pin set after the plan)
// under the exclusive lock.
func TestPruneRefusesHeldDamagedSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ctx := t.Context()
	ids := saveBlobs(t, r, 5, 40)
	e.src.add("good", ids[:20])
	bad := e.src.add("bad", ids[20:30])
	e.src.damaged = map[blob.ID]bool{bad: true}
	packs := packCount(t, r)

	if _, err := SetPin(ctx, r, Pin{Workspace: "w", Snapshots: []PinnedSnapshot{{ID: bad, Why: "last good checkpoint of the lifecycle"}}}, t0); err != nil {
		t.Fatal(err)
	}
	p, err := PlanPrune(ctx, r, e.src, Options{ForgetDamaged: true, MaxUnused: 0.001})
	if !errors.Is(err, repo.ErrDamaged) || !strings.Contains(err.Error(), bad.String()) ||
		!strings.Contains(err.Error(), "held: last good checkpoint of the lifecycle") || !strings.Contains(err.Error(), "capture the workspace again") ||
		!strings.Contains(err.Error(), "recover it from an older checkpoint") {
		t.Fatalf("plan with a held damaged snapshot: %v", err)
	}
	if p == nil || len(p.Damaged) != 1 || p.Damaged[0].Held == "" {
		t.Fatalf("plan %+v", p)
	}
	p.Close()

	// The pin appears after the plan: Execute checks again under the lock.
	if _, err := RemovePins(ctx, r, "w"); err != nil {
		t.Fatal(err)
	}
	p, err = PlanPrune(ctx, r, e.src, Options{ForgetDamaged: true, MaxUnused: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.Delete)+len(p.Repack) == 0 {
		t.Fatalf("the test needs a plan that deletes: %+v", p)
	}
	if _, err := SetPin(ctx, r, Pin{Workspace: "w", All: true, AllWhy: "recovery operation op-1 runs"}, t0); err != nil {
		t.Fatal(err)
	}
	st, err := p.Execute(ctx, r, e.src, ExecOptions{Lock: lockFor(r), ForgetDamaged: true})
	// The fake snapshot has no manifest: its workspace is unknown while a
	// pin holds all of one workspace, so it counts as held.
	if !errors.Is(err, repo.ErrDamaged) || !strings.Contains(err.Error(), "workspace is unknown") || !strings.Contains(err.Error(), "recovery operation op-1 runs") {
		t.Fatalf("execute with a pin set after the plan: %v", err)
	}
	if st.PacksDeleted+st.IndexRemoved+st.SnapshotsForgotten != 0 || packCount(t, r) < packs {
		t.Fatalf("deleted something: %+v, %d packs of %d", st, packCount(t, r), packs)
	}
	if locks, _ := r.ListLocks(ctx); len(locks) != 0 {
		t.Fatalf("locks left: %+v", locks)
	}
	loadAll(t, r, ids)

	// Without the pin, --forget-damaged goes ahead.
	if _, err := RemovePins(ctx, r, "w"); err != nil {
		t.Fatal(err)
	}
	_, st = e.prune(r, Options{ForgetDamaged: true, MaxUnused: 0.001})
	if st.SnapshotsForgotten != 1 {
		t.Fatalf("stats %+v", st)
	}
	loadAll(t, r, ids[:20])
	checkClean(t, r)
}

// A damaged snapshot whose manifest opens is looked up by its workspace.
func TestPruneHeldDamagedByWorkspace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	ctx := t.Context()
	ids := saveBlobs(t, r, 6, 10)
	b, _ := json.Marshal(map[string]any{"version": 1, "workspace": "w"}) // prune reads only the workspace
	bad, err := r.SaveObject(ctx, crypt.KindSnapshot, blob.Workspace, b)
	if err != nil {
		t.Fatal(err)
	}
	e.src.snaps[bad] = nil
	e.src.order = append(e.src.order, bad)
	e.src.add("good", ids)
	e.src.damaged = map[blob.ID]bool{bad: true}
	if _, err := SetPin(ctx, r, Pin{Workspace: "v", All: true, AllWhy: "v is lost"}, t0); err != nil {
		t.Fatal(err)
	}
	p, err := PlanPrune(ctx, r, e.src, Options{ForgetDamaged: true})
	if err != nil {
		t.Fatalf("a pin of another workspace held it: %v", err)
	}
	p.Close()
	if _, err := SetPin(ctx, r, Pin{Workspace: "w", All: true, AllWhy: "w is lost and an offer is open"}, t0); err != nil {
		t.Fatal(err)
	}
	p, err = PlanPrune(ctx, r, e.src, Options{ForgetDamaged: true})
	if !errors.Is(err, repo.ErrDamaged) || !strings.Contains(err.Error(), `of workspace "w" (held: w is lost and an offer is open)`) {
		t.Fatalf("plan: %v", err)
	}
	p.Close()
}
