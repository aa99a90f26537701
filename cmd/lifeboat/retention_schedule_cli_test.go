package main

import (
	"testing"
)

// TestRetentionScheduleCLI: with `[retention] every`, serve applies
// retention to every workspace on that schedule instead of after each
// capture: each run is a `retention` event with its report, and once a
// run began after the last capture, only the last good checkpoint is
// left (keep_last = 1).
func TestRetentionScheduleCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, `
[retention]
keep_last = 1
every = "1s"
`)
	s.start()
	work := s.addLocalWorkspace("bot1", 1)
	ev := s.events(t)
	var good string
	for i := range 3 {
		writeTree(t, work, uint64(50+i))
		rc := s.cliJSON("capture", "--workspace", "bot1")
		if rc["outcome"] != "captured" || rc["retention_error"] != nil {
			t.Fatalf("capture %d: %v", i, rc)
		}
		good = rc["snapshot"].(string)
	}
	// Events come in order: a run whose event follows the last receipt's
	// may have begun before it was promoted, the next one began after.
	last, runs := false, 0
	for m := range ev.until() {
		switch m.Type {
		case "receipt":
			last = last || m.Data.(map[string]any)["snapshot"] == good
		case "retention":
			d := m.Data.(map[string]any)
			if d["error"] != nil {
				t.Fatalf("scheduled retention failed: %v", d)
			}
			if _, ok := d["report"].(map[string]any)["snapshots_forgotten"]; !ok {
				t.Fatalf("retention event without a report: %v", d)
			}
			if last {
				runs++
			}
		}
		if runs == 2 {
			break
		}
	}
	snaps := jsonLines(t, s.ok("snapshots", "--json").stdout)
	if len(snaps) != 1 || snaps[0]["id"] != good {
		t.Fatalf("snapshots after the schedule ran: %v, want only the last good checkpoint %s", snaps, good)
	}
	s.stop()
}
