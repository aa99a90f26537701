package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// catalogRecords returns the catalog's raw (sealed) records by snapshot
// id, and how many it holds.
func catalogRecords(t *testing.T, r *snaptest.Repo, ids []blob.ID) (map[blob.ID][]byte, int) {
	t.Helper()
	raw := map[blob.ID][]byte{}
	total, err := r.Index().CatalogGet(ids, true, func(i int, v []byte) { raw[ids[i]] = bytes.Clone(v) })
	if err != nil {
		t.Fatal(err)
	}
	return raw, total
}

// The snapshot catalog: once it knows the repository's snapshots, `latest`
// loads one manifest (the newest complete one of the workspace), and a
// listing of a workspace only that workspace's. What it knows never
// changes an answer: a snapshot it does not know, or whose record does not
// open, is loaded; a forgotten one leaves it.
func TestCatalogLoadsOnlyWhatIsAsked(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := &loadCounter{Repo: snaptest.NewRepo(t)}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	byWs := map[string][]*snapshot.Manifest{}
	var all []blob.ID
	for i := range 10 {
		for _, ws := range []string{"alpha-workspace", "beta-workspace", "gamma-workspace"} {
			m := r.SnapAt(t, ws, at(3*i))
			byWs[ws] = append(byWs[ws], m)
			all = append(all, m.ID)
		}
	}
	// alpha's newest is partial: `latest` is the one before it.
	partial := r.Manifest(t, r.Dir(t, "", snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644}), false)
	partial.Workspace, partial.Time, partial.Complete = "alpha-workspace", at(100), false
	partial.Errors = []snapshot.CaptureError{{Path: "f", Error: "unreadable"}}
	pid, err := snapshot.SaveManifest(ctx, r, partial)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, pid)
	want := byWs["alpha-workspace"][9]

	latest := func(ws string) *snapshot.Manifest {
		t.Helper()
		m, skipped, err := snapshot.Resolve(ctx, r, "latest", ws, snapshot.ResolveOptions{})
		if err != nil || len(skipped) != 0 {
			t.Fatalf("latest of %s: %v, skipped %v", ws, err, skipped)
		}
		return m
	}
	if m := latest("alpha-workspace"); m.ID != want.ID {
		t.Fatalf("latest: %s, want %s", m.ID.Short(), want.ID.Short())
	}
	if n := r.took(); n != int64(len(all)) {
		t.Fatalf("with an empty catalog, latest loaded %d manifests, want all %d", n, len(all))
	}
	if m := latest("alpha-workspace"); m.ID != want.ID {
		t.Fatalf("latest again: %s, want %s", m.ID.Short(), want.ID.Short())
	}
	if n := r.took(); n != 1 {
		t.Fatalf("with the catalog, latest loaded %d manifests, want 1", n)
	}

	// A listing of one workspace loads that workspace's manifests.
	snaps, bad, err := snapshot.List(ctx, r, "beta-workspace")
	if err != nil || len(bad) != 0 {
		t.Fatalf("list: %v, damaged %v", err, bad)
	}
	var got, wantIDs []blob.ID
	for i, m := range snaps {
		got, wantIDs = append(got, m.ID), append(wantIDs, byWs["beta-workspace"][i].ID)
	}
	if !slices.Equal(got, wantIDs) || len(got) != 10 {
		t.Fatalf("listed %d snapshots of beta, want its 10 in time order", len(got))
	}
	if n := r.took(); n != 10 {
		t.Fatalf("listing one workspace loaded %d manifests, want its 10", n)
	}

	// The records are sealed: no workspace name in the clear.
	raw, total := catalogRecords(t, r.Repo, all)
	if len(raw) != len(all) || total != len(all) {
		t.Fatalf("the catalog holds %d records (%d of the snapshots), want %d", total, len(raw), len(all))
	}
	for id, v := range raw {
		if bytes.Contains(v, []byte("-workspace")) {
			t.Fatalf("the record of %s holds its workspace in the clear", id.Short())
		}
	}

	// A record moved under another snapshot does not open there: that
	// snapshot is loaded, and its own record written back.
	olderAlpha := byWs["alpha-workspace"][8]
	if err := r.Index().CatalogPut([]blob.ID{want.ID}, [][]byte{raw[olderAlpha.ID]}); err != nil {
		t.Fatal(err)
	}
	if m := latest("alpha-workspace"); m.ID != want.ID {
		t.Fatalf("latest with a moved record: %s, want %s", m.ID.Short(), want.ID.Short())
	}
	if n := r.took(); n != 1 {
		t.Fatalf("with a moved record, latest loaded %d manifests, want 1 (the snapshot whose record did not open)", n)
	}
	if fixed, _ := catalogRecords(t, r.Repo, []blob.ID{want.ID}); bytes.Equal(fixed[want.ID], raw[olderAlpha.ID]) {
		t.Fatal("the moved record was not replaced")
	}

	// A snapshot saved elsewhere (the catalog does not know it) is found.
	newest := r.SnapAt(t, "alpha-workspace", at(200))
	if m := latest("alpha-workspace"); m.ID != newest.ID {
		t.Fatalf("latest after a new snapshot: %s, want %s", m.ID.Short(), newest.ID.Short())
	}
	if n := r.took(); n != 1 {
		t.Fatalf("latest after a new snapshot loaded %d manifests, want 1", n)
	}

	// Damage to another workspace's snapshot that the catalog places
	// there does not concern this workspace's listing; a listing of all
	// names it.
	rsFlipSnapshot(r.Repo, t, byWs["gamma-workspace"][3].ID)
	if _, bad, err := snapshot.List(ctx, r, "beta-workspace"); err != nil || len(bad) != 0 {
		t.Fatalf("beta's listing with gamma's damage: %v, damaged %v", err, bad)
	}
	if _, bad, err := snapshot.List(ctx, r, ""); err != nil || len(bad) != 1 || bad[byWs["gamma-workspace"][3].ID] == nil {
		t.Fatalf("listing all with gamma's damage: %v, damaged %v", err, bad)
	}

	// Forgotten snapshots leave the catalog at the next listing of all.
	for _, m := range byWs["gamma-workspace"][:5] {
		if err := r.RemoveObject(ctx, crypt.KindSnapshot, m.ID); err != nil {
			t.Fatal(err)
		}
	}
	if m := latest("beta-workspace"); m.ID != byWs["beta-workspace"][9].ID {
		t.Fatalf("beta's latest: %s", m.ID.Short())
	}
	if _, total := catalogRecords(t, r.Repo, nil); total != len(all)+1-5 {
		t.Fatalf("after forgetting 5 of %d snapshots the catalog holds %d records, want %d", len(all)+1, total, len(all)+1-5)
	}
}

// Two complete snapshots of one workspace taken at the same time: in
// List's order (time, then id) the one with the higher id is `latest`.
// When it is damaged, `latest` refuses (it may be the newest) whether or
// not the catalog knows its time.
func TestCatalogLatestEqualTimesDamaged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hi, lo := r.SnapAt(t, "w", t0), r.SnapAt(t, "w", t0)
	if bytes.Compare(hi.ID[:], lo.ID[:]) < 0 {
		hi, lo = lo, hi
	}
	if m, _, err := snapshot.Resolve(ctx, r, "latest", "w", snapshot.ResolveOptions{}); err != nil || m.ID != hi.ID {
		t.Fatalf("latest: %v, %v; want %s", m, err, hi.ID.Short())
	}
	rsFlipSnapshot(r, t, hi.ID)
	for _, known := range []bool{true, false} {
		if !known {
			if _, err := r.Index().CatalogRetain(nil); err != nil {
				t.Fatal(err)
			}
		}
		m, skipped, err := snapshot.Resolve(ctx, r, "latest", "w", snapshot.ResolveOptions{})
		var le *snapshot.LatestError
		if m != nil || !errors.As(err, &le) || len(skipped) != 1 || skipped[0].ID != hi.ID || le.Fallback == nil || le.Fallback.ID != lo.ID {
			t.Fatalf("catalog knows it %v: latest %v, skipped %v, %v; want a LatestError naming %s", known, m, skipped, err, hi.ID.Short())
		}
	}
}

// cancellingRepo cancels the context at the first snapshot load.
type cancellingRepo struct {
	*snaptest.Repo
	cancel context.CancelFunc
}

func (c *cancellingRepo) LoadObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) (blob.Tier, []byte, error) {
	if kind == crypt.KindSnapshot {
		c.cancel()
		return 0, nil, ctx.Err()
	}
	return c.Repo.LoadObject(ctx, kind, id)
}

// A cancellation while `latest` loads the snapshot the catalog points at
// is the cancellation: not "no snapshot" (a capture would record no
// parent), not damage.
func TestCatalogLatestCancelled(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	r.SnapAt(t, "w", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := snapshot.Find(t.Context(), r, "latest", "w"); err != nil { // the catalog learns it
		t.Fatal(err)
	}
	for _, o := range []snapshot.ResolveOptions{{}, {SkipDamaged: true}} {
		ctx, cancel := context.WithCancel(t.Context())
		_, _, err := snapshot.Resolve(ctx, &cancellingRepo{Repo: r, cancel: cancel}, "latest", "w", o)
		cancel()
		if !errors.Is(err, context.Canceled) || errors.Is(err, snapshot.ErrNoSnapshot) {
			t.Fatalf("latest (%+v) cancelled during its load: %v, want context.Canceled", o, err)
		}
	}
}

// Once the last snapshot is forgotten, the next listing of all leaves no
// record in the catalog.
func TestCatalogEmptiedWithRepository(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	m := r.SnapAt(t, "w", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, _, err := snapshot.List(ctx, r, ""); err != nil {
		t.Fatal(err)
	}
	if _, total := catalogRecords(t, r, nil); total != 1 {
		t.Fatalf("the catalog holds %d records, want 1", total)
	}
	if err := r.RemoveObject(ctx, crypt.KindSnapshot, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Find(ctx, r, "latest", "w"); !errors.Is(err, snapshot.ErrNoSnapshot) {
		t.Fatalf("latest of an empty repository: %v", err)
	}
	if _, total := catalogRecords(t, r, nil); total != 0 {
		t.Fatalf("the catalog holds %d records of an empty repository, want 0", total)
	}
}

// An id given with a workspace names its snapshot, whatever workspace the
// catalog places it in: a damaged one fails with its damage, not "no
// matching snapshot".
func TestCatalogIDOfAnotherWorkspaceDamaged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.SnapAt(t, "w", t0)
	x := r.SnapAt(t, "x", t0.Add(time.Hour))
	if _, _, err := snapshot.List(ctx, r, ""); err != nil { // the catalog learns both
		t.Fatal(err)
	}
	rsFlipSnapshot(r, t, x.ID)
	_, _, err := snapshot.Resolve(ctx, r, x.ID.String()[:8], "w", snapshot.ResolveOptions{})
	if !errors.Is(err, repo.ErrCorrupt) || errors.Is(err, snapshot.ErrNoSnapshot) {
		t.Fatalf("x's damaged snapshot by id, with workspace w: %v, want its damage", err)
	}
}
