package chunk

import (
	"fmt"
	"sync"
)

// window is how many bytes a fingerprint covers.
const window = 64

// lane is how far each of the four interleaved fingerprints of cut moves
// per block (see cut).
const lane = 8 << 10

// tables are a polynomial's two lookup tables for the rolling fingerprint.
//
// The fingerprint of a window w_0..w_63 is the polynomial
// Σ w_i·x^(8·(63-i)) mod pol, kept fully reduced (degree below deg(pol)).
// Sliding it one byte is: remove the oldest byte's term (out), multiply by
// x^8 and add the new byte, then reduce (mod). So the fingerprint at a
// position depends on the 64 bytes before it and on nothing else, which is
// what lets cut compute several positions' fingerprints at once. These are
// the same fingerprints restic/chunker computes; chunk_test checks the cuts
// against it.
type tables struct {
	// out[b] is the term of byte b after 63 more bytes came in:
	// b·x^(8·63) mod pol.
	out [256]uint64
	// mod[t] reduces a fingerprint whose top byte t was shifted past the
	// degree: t·x^k mod pol, plus t·x^k itself so one XOR also clears it.
	mod [256]uint64
	// shift is deg(pol) - 8: fingerprint >> shift is its top byte.
	shift uint
}

// tableCache holds the tables of each polynomial used so far, as
// computing them takes about a millisecond and a process uses few.
var tableCache sync.Map // Pol -> *tables

// tablesFor returns pol's tables, or an error if the chunker cannot use
// pol: its degree must be 8 to 53, so that a fingerprint shifted by a byte
// still fits in 64 bits.
func tablesFor(pol Pol) (*tables, error) {
	if t, ok := tableCache.Load(pol); ok {
		return t.(*tables), nil
	}
	k := pol.Deg()
	if k < 8 || k > 53 {
		return nil, fmt.Errorf("chunker polynomial has degree %d, it must be 8 to 53 (is the repository config damaged?)", k)
	}
	t := &tables{shift: uint(k - 8)}
	for b := range 256 {
		term := Pol(b)
		for range window - 1 {
			term = (term << 8).Mod(pol)
		}
		t.out[b] = uint64(term)
		top := Pol(b) << uint(k)
		t.mod[b] = uint64(top.Mod(pol) | top)
	}
	tableCache.Store(pol, t)
	return t, nil
}

// fingerprint returns the fingerprint of w, which holds window bytes.
func (t *tables) fingerprint(w []byte) uint64 {
	sh := t.shift & 63
	var fp uint64
	for _, b := range w {
		fp = (fp<<8 | uint64(b)) ^ t.mod[byte(fp>>sh)]
	}
	return fp
}

// cut looks for the first end offset e in [from, to] at which the window
// data[e-window:e] has a fingerprint with no bit of mask set, and returns
// it, or -1 if there is none and the offset to go on from once data has
// more bytes. from must be at least window. Unless final, cut leaves the
// offsets after its last whole block of lanes for then, as they are looked
// at four times faster in a block.
//
// The fingerprint's update is one long chain of dependent steps (a table
// load, shifts and XORs per byte), so a single fingerprint leaves most of
// the CPU idle. cut runs four at once, on four consecutive lanes of a
// block, and only on a block with a cut in it goes back to find the first
// one with one fingerprint: 2.5 times the speed of a single one.
func (t *tables) cut(data []byte, from, to int, mask uint64, final bool) (e, next int) {
	for to-from >= 4*lane {
		if t.any4(data[from-window:from+4*lane], mask) {
			if e := t.cut1(data, from, from+4*lane, mask); e >= 0 {
				return e, 0
			}
		}
		from += 4 * lane
	}
	if !final {
		return -1, from
	}
	return t.cut1(data, from, to, mask), to + 1
}

// cut1 is cut with one fingerprint.
func (t *tables) cut1(data []byte, from, to int, mask uint64) int {
	fp := t.fingerprint(data[from-window : from])
	if fp&mask == 0 {
		return from
	}
	sh := t.shift & 63
	in := data[from:to]
	out := data[from-window : to-window]
	for i, b := range in {
		fp ^= t.out[out[i]]
		fp = (fp<<8 | uint64(b)) ^ t.mod[byte(fp>>sh)]
		if fp&mask == 0 {
			return from + i + 1
		}
	}
	return -1
}

// any4 reports whether any end offset in [window, window+4*lane] of blk
// (which holds window+4*lane bytes) is a cut, looking at four lanes of
// lane offsets at once.
func (t *tables) any4(blk []byte, mask uint64) bool {
	_ = blk[window+4*lane-1]
	f0 := t.fingerprint(blk[0:window])
	f1 := t.fingerprint(blk[lane : lane+window])
	f2 := t.fingerprint(blk[2*lane : 2*lane+window])
	f3 := t.fingerprint(blk[3*lane : 3*lane+window])
	if f0&mask == 0 || f1&mask == 0 || f2&mask == 0 || f3&mask == 0 {
		return true
	}
	sh := t.shift & 63
	a := blk[0 : lane+window]
	b := blk[lane : 2*lane+window]
	c := blk[2*lane : 3*lane+window]
	d := blk[3*lane : 4*lane+window]
	for i := window; i < lane+window; i++ {
		f0 ^= t.out[a[i-window]]
		f1 ^= t.out[b[i-window]]
		f2 ^= t.out[c[i-window]]
		f3 ^= t.out[d[i-window]]
		f0 = (f0<<8 | uint64(a[i])) ^ t.mod[byte(f0>>sh)]
		f1 = (f1<<8 | uint64(b[i])) ^ t.mod[byte(f1>>sh)]
		f2 = (f2<<8 | uint64(c[i])) ^ t.mod[byte(f2>>sh)]
		f3 = (f3<<8 | uint64(d[i])) ^ t.mod[byte(f3>>sh)]
		if f0&mask == 0 || f1&mask == 0 || f2&mask == 0 || f3&mask == 0 {
			return true
		}
	}
	return false
}
