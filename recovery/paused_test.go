package recovery

import (
	"context"
	"path/filepath"
	"testing"

	"lifeboat/checkpoint"
	"lifeboat/profile/profiletest"
	"lifeboat/recovery/statedb/pgtest"
	"lifeboat/snapshot"
)

func TestMain(m *testing.M) {
	runKillChildIfSet()
	profiletest.Main(m, pgtest.Stop)
}

// A browser paused by a writer (its process stopped) passes the quiesce
// step and its profile is captured into the sensitive tier.
func TestQuiescePausedBrowserCaptured(t *testing.T) {
	e := newEnv(t, false, true, nil)
	prof := filepath.Join(e.prov.dir("i1"), "chrome")
	writeFiles(t, prof, map[string]string{"Local State": "{}", "Default/Preferences": "{}"})
	w, err := profiletest.StartWriter(profiletest.Options{WAL: filepath.Join(prof, "Default", "Cookies")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Kill()
	lockProfile(t, prof, w.PID)
	r := e.l.Capture(context.Background(), "ws1", ReasonManual)
	e.want(r, Captured)
	if err := checkpoint.Verify(context.Background(), e.r, mustID(t, r.Snapshot)); err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.LoadManifest(context.Background(), e.r, mustID(t, r.Snapshot))
	if err != nil || m.Sensitive == nil {
		t.Fatalf("the paused profile is not in the sensitive part: %v", err)
	}
}
