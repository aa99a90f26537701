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

// Reserve reports the repository's reserve: blocks of random bytes that
// hold disk space for the day the repository's disk is full. Every command
// writes a lock first, so on a full disk none can run, not even forget or
// prune; releasing the reserve (SetReserve(0), which writes nothing)
// gives them room to free more. Nothing reads the blocks.
func (r *Repository) Reserve(ctx context.Context) (Reserved, error) {
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

// SetReserve grows or shrinks the reserve to the fewest whole blocks that
// hold size bytes (none for 0) and returns what it then holds, also when
// it fails part way (a disk that fills up while the reserve grows). It
// takes no lock: releasing the reserve must work on a full disk, and the
// blocks are nothing any other command reads. Blocks are random bytes, so
// a compressing or deduplicating filesystem still gives them their space.
func (r *Repository) SetReserve(ctx context.Context, size int64) (Reserved, error) {
	if size < 0 {
		return Reserved{}, fmt.Errorf("reserve of %d bytes: want 0 or more", size)
	}
	want := int((size + ReserveBlockSize - 1) / ReserveBlockSize)
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
			return r.reservedAfter(ctx, fmt.Errorf("releasing reserve block %s: %w", h.Name, err))
		}
		names = names[:len(names)-1]
	}
	if len(names) == want {
		return r.reservedAfter(ctx, nil)
	}
	var seed [32]byte
	crand.Read(seed[:])
	rng := rand.NewChaCha8(seed)
	block := make([]byte, ReserveBlockSize)
	for range want - len(names) {
		_, _ = rng.Read(block)
		h := backend.Handle{Type: backend.Reserve, Name: blob.ID(blake3.Sum256(block)).String()}
		if err := r.be.Save(ctx, h, block); err != nil {
			return r.reservedAfter(ctx, fmt.Errorf("writing reserve block %s: %w", h.Name, err))
		}
	}
	return r.reservedAfter(ctx, nil)
}

// reservedAfter returns the reserve as it is now, with err, SetReserve's.
func (r *Repository) reservedAfter(ctx context.Context, err error) (Reserved, error) {
	res, lerr := r.Reserve(ctx)
	return res, errors.Join(err, lerr)
}
