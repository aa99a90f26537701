package snaptest

import (
	"context"
	"testing"

	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Check runs the repository and snapshot checkers and fails the
// test on any problem.
func Check(t testing.TB, r *repo.Repository) {
	t.Helper()
	res, err := r.Check(context.Background(), repo.CheckOptions{ReadData: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		t.Errorf("check: %s %s: %s", p.Kind, p.Object, p.Detail)
	}
	_, probs, err := snapshot.CheckSnapshots(context.Background(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("check snapshots: %s %s: %s", p.Kind, p.Object, p.Detail)
	}
}
