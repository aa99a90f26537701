package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/recovery"
)

// A workspace whose instance the provider confirmed missing is not
// captured by the CLI: park and capture are refused with exit 21, and the
// last good checkpoint stays.
func TestCaptureOfLostWorkspaceRefused(t *testing.T) {
	e, flags := lifecycleEnv(t)
	root := filepath.Join(e.dir, "root")
	writeTree(t, filepath.Join(root, "bot1"), 1)
	e.ok(append(flags, "workspace", "add", "bot1")...)
	snap := jsonLines(t, e.ok(append(flags, "park", "bot1", "--json")...).stdout)[0]["snapshot"]
	if err := os.RemoveAll(filepath.Join(root, "bot1")); err != nil {
		t.Fatal(err)
	}
	store, err := recovery.OpenStore(filepath.Join(e.dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	lc, err := recovery.New(recovery.Config{Store: store, Capturer: &recovery.RepoCapturer{}, Providers: []providers.Provider{local.New(root)}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := recovery.NewService(recovery.ServiceConfig{Lifecycle: lc, Restorer: &recovery.RepoRestorer{}, StateDir: filepath.Join(e.dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	h, err := svc.Check(context.Background(), "bot1")
	svc.Close()
	lc.Close()
	_ = store.Close()
	if err != nil || h.State != recovery.HealthLost {
		t.Fatalf("check: %+v %v", h, err)
	}
	for _, cmd := range [][]string{{"park", "bot1", "--json"}, {"capture", "--workspace", "bot1", "--json"}} {
		r := e.run(append(flags, cmd...)...)
		lines := jsonLines(t, r.stdout)
		if r.code != exitRecovering || lines[0]["outcome"] != "refused" || !strings.Contains(r.stderr, "missing") {
			t.Fatalf("%v: %d %v %s", cmd, r.code, lines, r.stderr)
		}
	}
	if w := e.showWorkspace(flags, "bot1"); w.LastGood.Snapshot != snap || w.Health.State != recovery.HealthLost {
		t.Fatalf("workspace: %+v", w)
	}
}
