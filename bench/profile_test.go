package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"lifeboat/backend/local"
	"lifeboat/crypt"
	"lifeboat/repo"
)

func benchRepo(tb testing.TB) *repo.Repository {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	be, err := local.Create(dir)
	if err != nil {
		tb.Fatal(err)
	}
	pw := []byte("bench profile password")
	if _, err := repo.Init(ctx, be, pw, repo.InitOptions{KDF: crypt.NewKDFParams(1, 64, 1)}); err != nil {
		tb.Fatal(err)
	}
	r, err := repo.Open(ctx, be, pw, repo.Options{CacheDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

var profileScale = Scale{SourceFiles: 40, DepFiles: 20, BinaryMiB: 1, LogKiB: 8}

func TestProfileRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "ws")
	fx, err := WriteProfileWorkspace(ctx, src, 11, profileScale)
	if err != nil {
		t.Fatal(err)
	}
	r := benchRepo(t)
	target := filepath.Join(t.TempDir(), "out")
	if _, probs, err := ProfileRoundTrip(ctx, r, src, target); err != nil || len(probs) != 0 {
		t.Fatalf("round trip: %v %v", probs, err)
	}
	if err := fx.Check(ctx, filepath.Join(target, filepath.FromSlash(ProfileRel)), true); err != nil {
		t.Fatal(err)
	}
	if d, err := Compare(filepath.Join(src, "project"), filepath.Join(target, "project")); err != nil || len(d) != 0 {
		t.Fatalf("workspace differs: %v %v", d, err)
	}
}

// BenchmarkProfileRoundTrip measures a capture and a restore with
// profiles of a small workspace: the cost of discovery, checkpointing,
// the sensitive-tier capture and the validation in staging.
func BenchmarkProfileRoundTrip(b *testing.B) {
	ctx := context.Background()
	src := filepath.Join(b.TempDir(), "ws")
	if _, err := WriteProfileWorkspace(ctx, src, 11, profileScale); err != nil {
		b.Fatal(err)
	}
	r := benchRepo(b)
	out := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		if _, _, err := ProfileRoundTrip(ctx, r, src, filepath.Join(out, fmt.Sprint(i))); err != nil {
			b.Fatal(err)
		}
	}
}
