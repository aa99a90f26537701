package repo

import (
	"context"
	"math"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
)

// savesCounted is a backend that counts its saves.
type savesCounted struct {
	backend.Backend
	saves atomic.Int64
}

func (b *savesCounted) Save(ctx context.Context, h backend.Handle, data []byte) error {
	b.saves.Add(1)
	return b.Backend.Save(ctx, h, data)
}

// SetReserve keeps the fewest whole blocks that hold the size asked for;
// releasing blocks saves nothing; sizes below 0 or above MaxReserve are
// refused and change nothing.
func TestSetReserve(t *testing.T) {
	tr := newTestRepo(t)
	be := &savesCounted{Backend: tr.be}
	r := tr.open(t, be, testPassword)
	ctx := context.Background()
	for _, c := range []struct {
		size   int64
		blocks int
	}{{1, 1}, {ReserveBlockSize, 1}, {ReserveBlockSize + 1, 2}, {3 * ReserveBlockSize, 3}, {ReserveBlockSize - 1, 1}, {0, 0}, {2 * ReserveBlockSize, 2}} {
		before := be.saves.Load()
		old, err := r.Reserved(ctx)
		must(t, err)
		got, err := r.SetReserve(ctx, c.size)
		if err != nil || got.Blocks != c.blocks || got.Bytes != int64(c.blocks)*ReserveBlockSize {
			t.Fatalf("SetReserve(%d) = %+v, %v; want %d blocks", c.size, got, err, c.blocks)
		}
		if saved := int(be.saves.Load() - before); saved != max(c.blocks-old.Blocks, 0) {
			t.Errorf("SetReserve(%d) from %d blocks saved %d files", c.size, old.Blocks, saved)
		}
	}
	for _, size := range []int64{-1, MaxReserve + 1, math.MaxInt64} {
		if _, err := r.SetReserve(ctx, size); err == nil {
			t.Errorf("SetReserve(%d) was not refused", size)
		}
		if got, err := r.Reserved(ctx); err != nil || got.Blocks != 2 {
			t.Errorf("after the refused SetReserve(%d): %+v, %v", size, got, err)
		}
	}
}
