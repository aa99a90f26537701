package index_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/index"
)

// CatalogRetain keeps exactly the records of the ids it is given, however
// the dropped ones lie among the kept (runs, first, last, all).
func TestCatalogRetain(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	d, err := index.OpenDB(t.TempDir(), blob.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for round := range 20 {
		ids := make([]blob.ID, 1+rng.IntN(300))
		recs := make([][]byte, len(ids))
		for i := range ids {
			for j := range ids[i] {
				ids[i][j] = byte(rng.Uint32())
			}
			recs[i] = []byte{byte(i)}
		}
		if err := d.CatalogPut(ids, recs); err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(ids, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
		var keep []blob.ID
		switch round {
		case 0: // none
		case 1:
			keep = ids
		default:
			for _, id := range ids {
				if rng.IntN(3) == 0 {
					keep = append(keep, id)
				}
			}
		}
		dropped, err := d.CatalogRetain(keep)
		if err != nil {
			t.Fatal(err)
		}
		var left []blob.ID
		total, err := d.CatalogGet(ids, true, func(i int, _ []byte) { left = append(left, ids[i]) })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(left, keep) || total != len(keep) || dropped != len(ids)-len(keep) {
			t.Fatalf("round %d: kept %d of %d records (dropped %d, %d left in all), want %d", round, len(left), len(ids), dropped, total, len(keep))
		}
		if _, err := d.CatalogRetain(nil); err != nil { // empty for the next round
			t.Fatal(err)
		}
	}
}
