package recovery

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/local"
)

// TestWithLocalProvider runs the lifecycle over the real local adapter:
// capture into a repository, a native checkpoint, the previous one deleted,
// and a restart that rolls the directory back.
func TestWithLocalProvider(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := local.New(root)
	writeFiles(t, filepath.Join(root, "bot1"), map[string]string{"notes.md": "v1", "src/main.go": "package main"})
	store, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.AddWorkspace(Workspace{ID: "bot1", Provider: p.Name(), Instance: "bot1"}); err != nil {
		t.Fatal(err)
	}
	r := newTestRepo(t)
	clock := newFakeClock()
	l, err := New(Config{Store: store, Capturer: &RepoCapturer{Repo: r}, Providers: []providers.Provider{p}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first := l.Park(ctx, "bot1")
	if first.Outcome != Captured || first.Native == "" {
		t.Fatalf("first park: %+v", first)
	}
	writeFiles(t, filepath.Join(root, "bot1"), map[string]string{"notes.md": "v2"})
	clock.Advance(l.cfg.ParkInterval)
	second := l.Park(ctx, "bot1")
	if second.Outcome != Captured || second.Native == "" || second.Native == first.Native {
		t.Fatalf("second park: %+v", second)
	}
	ents, err := os.ReadDir(filepath.Join(root, ".lifeboat", "checkpoints"))
	if err != nil || len(ents) != 1 || ents[0].Name() != string(second.Native) {
		t.Fatalf("native checkpoints on disk: %v %v", ents, err)
	}
	writeFiles(t, filepath.Join(root, "bot1"), map[string]string{"notes.md": "v3, broken"})
	rr, err := l.Restart(ctx, "bot1")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := store.Workspace("bot1")
	b, err := os.ReadFile(filepath.Join(root, string(rr.To), "notes.md"))
	if err != nil || string(b) != "v2" || w.Instance != rr.To || w.Generation != 1 {
		t.Fatalf("after restart: %q %v, workspace %+v", b, err, w)
	}
}
