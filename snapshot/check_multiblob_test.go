package snapshot_test

import (
	"context"
	"os"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// CheckSnapshots reads every blob of a multi-blob directory, also when its
// first blob was seen already (in another snapshot).
func TestCheckSnapshotsEveryBlobOfDirectory(t *testing.T) {
	t.Parallel()
	r := snaptest.NewRepo(t)
	ctx := context.Background()
	var nodes []snapshot.Node
	for i := 0; i < snapshot.MaxNodesPerBlob+1; i++ {
		nodes = append(nodes, snapshot.Node{Name: []byte(fmtName(i)), Type: snapshot.TypeFIFO, Mode: 0o644})
	}
	big1 := r.Dir(t, "big", nodes...)
	m1 := r.Manifest(t, r.Dir(t, "root", big1), true)
	_ = m1
	// second snapshot: same first blob, second blob has a file whose chunk is not indexed
	bogus := blob.ID{1, 2, 3}
	nodes2 := append([]snapshot.Node(nil), nodes...)
	nodes2[len(nodes2)-1] = snapshot.Node{Name: nodes2[len(nodes2)-1].Name, Type: snapshot.TypeFile, Mode: 0o644, Size: 5, Content: []blob.ID{bogus}}
	big2 := r.Dir(t, "big", nodes2...)
	if big1.Subtree[0] != big2.Subtree[0] || big1.Subtree[1] == big2.Subtree[1] {
		t.Fatalf("setup: %v %v", big1.Subtree, big2.Subtree)
	}
	m2 := r.Manifest(t, r.Dir(t, "root", big2), false)
	m2.Time = m2.Time.Add(time.Hour)
	if _, err := snapshot.SaveManifest(ctx, r, m2); err != nil {
		t.Fatal(err)
	}
	n, probs, err := snapshot.CheckSnapshots(ctx, r.Repository, nil)
	t.Logf("snapshots %d problems %v err %v", n, probs, err)
	if len(probs) == 0 {
		t.Errorf("missing chunk of %s in snapshot %s not reported", nodes2[len(nodes2)-1].Name, m2.ID.Short())
	}
	_ = repo.ErrBlobNotFound
	_ = os.Getpid
}

func fmtName(i int) string { return "e" + string(rune('a'+i/10000%26)) + itoa(i) }
func itoa(i int) string {
	s := ""
	for k := 0; k < 6; k++ {
		s = string(rune('0'+i%10)) + s
		i /= 10
	}
	return s
}
