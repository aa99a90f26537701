package repo

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/zeebo/blake3"

	"lifeboat/backend"
	"lifeboat/blob"
)

// ReserveBlockSize is the size of one block of a repository's reserve.
const ReserveBlockSize = 16 << 20

// Reserved is what a repository's reserve holds.
type Reserved struct {
	Blocks int   `json:"blocks"`
	Bytes  int64 `json:"bytes"`
}

// Reserved reports the repository's reserve: blocks of random bytes that
// hold disk space for the day the repository's disk is full. Commands
// write a lock first, so on a full disk forget and prune cannot run;
// releasing the reserve (SetReserve(0), which writes nothing) gives them
// room to free more. Nothing reads the blocks.
func (r *Repository) Reserved(ctx context.Context) (Reserved, error) {
	var res Reserved
	err := r.be.List(ctx, backend.Reserve, func(fi backend.FileInfo) error {
		res.Blocks++
		res.Bytes += fi.Size
		return nil
	})
	if err != nil {
		return Reserved{}, fmt.Errorf("listing the reserve: %w", err)
	}
	return res, nil
}

// MaxReserve is the largest reserve SetReserve makes.
const MaxReserve = 1 << 50 // 1 PiB

// SetReserve grows or shrinks the reserve to the fewest whole blocks that
// hold size bytes (none for 0; at most MaxReserve) and returns what it
// then holds. When it fails part way (a disk that fills up while the
// reserve grows), the blocks saved or removed so far stay so; Reserved
// tells what it holds. It takes no lock: releasing the reserve must work
// on a full disk, and the blocks are nothing any other command reads.
// Blocks are random bytes, so a compressing or deduplicating filesystem
// still gives them their space.
func (r *Repository) SetReserve(ctx context.Context, size int64) (Reserved, error) {
	if size < 0 || size > MaxReserve {
		return Reserved{}, fmt.Errorf("reserve of %d bytes: want 0 to %d", size, int64(MaxReserve))
	}
	want := int(size / ReserveBlockSize)
	if size%ReserveBlockSize != 0 {
		want++
	}
	var names []string
	err := r.be.List(ctx, backend.Reserve, func(fi backend.FileInfo) error {
		names = append(names, fi.Name)
		return nil
	})
	if err != nil {
		return Reserved{}, fmt.Errorf("listing the reserve: %w", err)
	}
	for len(names) > want {
		h := backend.Handle{Type: backend.Reserve, Name: names[len(names)-1]}
		if err := r.be.Remove(ctx, h); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return Reserved{}, fmt.Errorf("releasing reserve block %s: %w", h.Name, err)
		}
		names = names[:len(names)-1]
	}
	if len(names) < want {
		var seed [32]byte
		crand.Read(seed[:])
		rng := rand.NewChaCha8(seed)
		block := make([]byte, ReserveBlockSize)
		for range want - len(names) {
			_, _ = rng.Read(block)
			h := backend.Handle{Type: backend.Reserve, Name: blob.ID(blake3.Sum256(block)).String()}
			if err := r.be.Save(ctx, h, block); err != nil {
				return Reserved{}, fmt.Errorf("writing reserve block %s: %w", h.Name, err)
			}
		}
	}
	return r.Reserved(ctx)
}
