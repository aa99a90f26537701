// Package snapshottest holds the snapshot helpers of tests outside the
// snapshot packages.
package snapshottest

import (
	"context"
	"testing"

	"lifeboat/snapshot"
)

// Count returns how many snapshots of workspace ws (every workspace when
// ws is "") s holds, failing t when one cannot be read.
func Count(t testing.TB, s snapshot.ObjectStore, ws string) int {
	t.Helper()
	snaps, bad, err := snapshot.List(context.Background(), s, ws)
	if err != nil || len(bad) > 0 {
		t.Fatalf("listing snapshots: %v %v", err, bad)
	}
	return len(snaps)
}
