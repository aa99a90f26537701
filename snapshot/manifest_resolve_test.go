package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// `latest` means the newest snapshot: one that cannot be read is never
// silently passed over. The repositories here
// are real; the damage is a byte flipped in a stored snapshot object, or a
// manifest sealed with the repository's key whose content does not
// validate.

// rsFlipSnapshot flips one byte in the middle of snapshot id's stored
// object, as storage damage or tampering would.
func rsFlipSnapshot(r *snaptest.Repo, tb testing.TB, id blob.ID) {
	tb.Helper()
	p := filepath.Join(r.Path, "snapshots", id.String())
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.Chmod(p, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// rsSealInvalid stores a manifest, sealed with the repository's key, of
// workspace ws at t that does not validate (a newer version).
func rsSealInvalid(r *snaptest.Repo, tb testing.TB, ws string, t time.Time) blob.ID {
	tb.Helper()
	m := r.Manifest(tb, r.Dir(tb, "", snapshot.Node{Name: []byte("f"), Type: snapshot.TypeFile, Mode: 0o644}), false)
	m.Workspace, m.Time, m.Version = ws, t, snapshot.ManifestVersion+1
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := r.SaveObject(context.Background(), crypt.KindSnapshot, blob.Workspace, b)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func TestResolveLatestDamaged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := r.SnapAt(t, "w", t0)
	newest := r.SnapAt(t, "w", t0.Add(time.Hour))
	r.SnapAt(t, "x", t0.Add(2*time.Hour))
	if m, _, err := snapshot.Resolve(ctx, r, "latest", "w", snapshot.ResolveOptions{}); err != nil || m.ID != newest.ID {
		t.Fatalf("latest before the damage: %v, %v", m, err)
	}
	rsFlipSnapshot(r, t, newest.ID)

	// Strict: refused, naming the damaged snapshot and the fallback.
	m, skipped, err := snapshot.Resolve(ctx, r, "latest", "w", snapshot.ResolveOptions{})
	var le *snapshot.LatestError
	if m != nil || !errors.As(err, &le) || !errors.Is(err, repo.ErrCorrupt) || len(skipped) != 1 || skipped[0].ID != newest.ID ||
		le.Fallback == nil || le.Fallback.ID != old.ID {
		t.Fatalf("latest with the newest damaged: %v, skipped %v, %v", m, skipped, err)
	}
	for _, want := range []string{newest.ID.Short(), "may be the newest", "--skip-damaged", old.ID.Short(), "lifeboat check"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	// --skip-damaged: the previous one, and what was skipped.
	m, skipped, err = snapshot.Resolve(ctx, r, "latest", "w", snapshot.ResolveOptions{SkipDamaged: true})
	if err != nil || m.ID != old.ID || len(skipped) != 1 || skipped[0].ID != newest.ID || !errors.Is(skipped[0], repo.ErrCorrupt) {
		t.Fatalf("latest skipping damaged: %v, skipped %v, %v", m, skipped, err)
	}
	// Find (a capture's parent) passes over it, as before.
	if m, err := snapshot.Find(ctx, r, "latest", "w"); err != nil || m.ID != old.ID {
		t.Fatalf("Find latest: %v, %v", m, err)
	}
	// By id, the damage is named: not "no matching snapshot".
	for _, ref := range []string{newest.ID.String()[:8], newest.ID.String()} {
		_, _, err = snapshot.Resolve(ctx, r, ref, "", snapshot.ResolveOptions{})
		if !errors.Is(err, repo.ErrCorrupt) || errors.Is(err, snapshot.ErrNoSnapshot) || !strings.Contains(err.Error(), newest.ID.Short()) ||
			!strings.Contains(err.Error(), "cannot be read") {
			t.Errorf("by id %s: %v", ref, err)
		}
		if _, err := snapshot.Find(ctx, r, ref, ""); !errors.Is(err, repo.ErrCorrupt) {
			t.Errorf("Find by id %s: %v", ref, err)
		}
	}
	if m, _, err := snapshot.Resolve(ctx, r, old.ID.String()[:8], "", snapshot.ResolveOptions{}); err != nil || m.ID != old.ID {
		t.Errorf("the intact one by id: %v, %v", m, err)
	}
}

// TestResolveLatestDamagedAttributed: a manifest that opened (so its
// workspace and time are authentic) but does not validate blocks `latest`
// only of its own workspace, and only when it is newer than the newest
// readable one.
func TestResolveLatestDamagedAttributed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := r.SnapAt(t, "w", t0.Add(time.Hour))
	rsSealInvalid(r, t, "x", t0.Add(2*time.Hour)) // another workspace's
	rsSealInvalid(r, t, "w", t0)                  // older
	if m, skipped, err := snapshot.Resolve(ctx, r, "latest", "w", snapshot.ResolveOptions{}); err != nil || m.ID != good.ID || len(skipped) != 0 {
		t.Fatalf("latest with an older and another workspace's damaged snapshot: %v, %v, %v", m, skipped, err)
	}
	bad := rsSealInvalid(r, t, "w", t0.Add(3*time.Hour)) // newer
	_, skipped, err := snapshot.Resolve(ctx, r, "latest", "w", snapshot.ResolveOptions{})
	if !errors.Is(err, repo.ErrCorrupt) || len(skipped) != 1 || skipped[0].ID != bad || skipped[0].Workspace != "w" {
		t.Fatalf("latest with a newer damaged snapshot: %v, %v", skipped, err)
	}
	if !strings.Contains(err.Error(), "this lifeboat reads version") {
		t.Errorf("the error does not say what is wrong with it: %v", err)
	}
	// No complete snapshot that can be read, skipping: none matches.
	r2 := snaptest.NewRepo(t)
	only := r2.SnapAt(t, "w", t0)
	rsFlipSnapshot(r2, t, only.ID)
	if _, skipped, err := snapshot.Resolve(ctx, r2, "latest", "w", snapshot.ResolveOptions{SkipDamaged: true}); !errors.Is(err, snapshot.ErrNoSnapshot) || len(skipped) != 1 {
		t.Errorf("only a damaged snapshot, skipping: %v, %v", skipped, err)
	}
	var le *snapshot.LatestError
	if _, _, err := snapshot.Resolve(ctx, r2, "latest", "w", snapshot.ResolveOptions{}); !errors.As(err, &le) || le.Fallback != nil ||
		strings.Contains(err.Error(), "--skip-damaged") {
		t.Errorf("only a damaged snapshot: %v", err)
	}
}

// loadCounter is a test repository, snapshot catalog included, that
// counts the snapshot manifests loaded from it.
type loadCounter struct {
	*snaptest.Repo
	loads atomic.Int64
}

func (c *loadCounter) LoadObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) (blob.Tier, []byte, error) {
	if kind == crypt.KindSnapshot {
		c.loads.Add(1)
	}
	return c.Repo.LoadObject(ctx, kind, id)
}

// took returns the loads counted since the last call.
func (c *loadCounter) took() int64 { return c.loads.Swap(0) }

// An id names one snapshot: resolving it loads that snapshot alone, not
// every snapshot of the repository, and still answers as a full listing
// would (another workspace's snapshot is not found, a damaged one is
// named).
func TestResolveIDLoadsOnlyItsSnapshot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []*snapshot.Manifest
	for i := range 6 {
		all = append(all, r.SnapAt(t, "w", t0.Add(time.Duration(i)*time.Minute)))
	}
	other := r.SnapAt(t, "x", t0)
	c := &loadCounter{Repo: r}
	m, _, err := snapshot.Resolve(ctx, c, all[2].ID.String(), "w", snapshot.ResolveOptions{})
	if err != nil || m.ID != all[2].ID {
		t.Fatalf("resolving %s: %v %v", all[2].ID.Short(), m, err)
	}
	if n := c.loads.Load(); n != 1 {
		t.Fatalf("resolving one id loaded %d snapshots, want 1", n)
	}
	if _, _, err := snapshot.Resolve(ctx, c, other.ID.String(), "w", snapshot.ResolveOptions{}); !errors.Is(err, snapshot.ErrNoSnapshot) {
		t.Fatalf("another workspace's snapshot resolved for w: %v", err)
	}
	rsFlipSnapshot(r, t, all[4].ID)
	if _, _, err := snapshot.Resolve(ctx, c, all[4].ID.String()[:12], "", snapshot.ResolveOptions{}); !errors.Is(err, repo.ErrCorrupt) || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("a damaged snapshot by its id: %v", err)
	}
}

// pairedLoads holds each load until another one is in flight beside it,
// or until give is closed.
type pairedLoads struct {
	snapshot.ObjectStore
	inFlight, paired atomic.Int64
	both             chan struct{} // closed once two loads were in flight together
	once             sync.Once
	give             <-chan struct{}
}

func (p *pairedLoads) LoadObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) (blob.Tier, []byte, error) {
	if p.inFlight.Add(1) >= 2 {
		p.paired.Add(1)
		p.once.Do(func() { close(p.both) })
	}
	defer p.inFlight.Add(-1)
	select {
	case <-p.both:
	case <-p.give:
	}
	return p.ObjectStore.LoadObject(ctx, kind, id)
}

// Listing loads the snapshots' manifests several at a time (from object
// storage each is a request), and answers as one at a time would: every
// snapshot of the workspace, in time order, and the damaged one named.
func TestListLoadsManifestsTogether(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := snaptest.NewRepo(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []blob.ID
	for i := range 40 {
		want = append(want, r.SnapAt(t, "w", t0.Add(time.Duration(i)*time.Minute)).ID)
		r.SnapAt(t, "x", t0.Add(time.Duration(i)*time.Minute))
	}
	give := make(chan struct{})
	p := &pairedLoads{ObjectStore: r, both: make(chan struct{}), give: give}
	// Loaded one at a time, the first load would wait for a second one
	// forever: the listing gives up waiting once ctx ends.
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() { <-lctx.Done(); close(give) }()
	snaps, bad, err := snapshot.List(lctx, p, "w")
	if err != nil || len(bad) != 0 {
		t.Fatalf("list: %v, damaged %v", err, bad)
	}
	if p.paired.Load() == 0 {
		t.Fatal("no two manifests were loaded together")
	}
	var got []blob.ID
	for _, m := range snaps {
		got = append(got, m.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d snapshots of w, want the %d in time order", len(got), len(want))
	}
}
