package repo

import "lifeboat/pack"

// GetBuffer returns an empty buffer with capacity at least n from the
// size-class pools that SaveStream's chunks and the pack code's buffers
// come from; PutBuffer gives it back.
func GetBuffer(n int) []byte { return pack.GetBuffer(n) }

// PutBuffer recycles a buffer (from GetBuffer or grown from one by
// append); the caller must not use it afterwards.
func PutBuffer(b []byte) { pack.PutBuffer(b) }
