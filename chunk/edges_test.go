package chunk_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"lifeboat/chunk"
	"lifeboat/internal/seedtest"
)

// stepReader returns at most step bytes a read, and its last bytes with
// io.EOF when eofWithData is set.
type stepReader struct {
	b           []byte
	step        int
	eofWithData bool
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b[:min(len(r.b), r.step)])
	r.b = r.b[n:]
	if len(r.b) == 0 && r.eofWithData {
		return n, io.EOF
	}
	return n, nil
}

// lookAhead is the most Next reads past a cut: a read (128 KiB) and the
// offsets of a part block (32 KiB) left to look at until then.
const lookAhead = 160 << 10

// checkCuts cuts data with c (after Start when start is set), handing Next
// a fresh buffer of capacity bufCap each time, and fails unless the cuts
// are want; a chunk that does not fit its buffer is in an array of another
// capacity, and one that does is in it (in place, so its capacity is the
// buffer's, which SaveStream relies on) unless the buffer is smaller than
// lookAhead or the chunk is the last and fills it exactly; and the chunks,
// all still held when the last is cut, concatenate to data: no Next wrote
// over a chunk it returned before.
func checkCuts(t testing.TB, c *chunk.Chunker, rd io.Reader, data []byte, bufCap int, start bool, want []int) {
	t.Helper()
	if start {
		head := make([]byte, c.MinSize())
		whole, done, err := c.Start(rd, head)
		switch {
		case err != nil:
			t.Fatal(err)
		case done:
			if len(want) > 1 || !bytes.Equal(whole, data) {
				t.Fatalf("Start took %d bytes whole, restic/chunker cuts %v", len(whole), want)
			}
			return
		}
	} else {
		c.Reset(rd)
	}
	// The buffers are consecutive in one array, each after the chunks
	// stored before it, so that holding them all takes no more memory
	// than data.
	arena := make([]byte, len(data)+bufCap)
	off := 0
	var chunks [][]byte
	var got []int
	var moved []bool // chunk i fits its buffer but is not in it
	for {
		buf := arena[off : off : off+bufCap]
		ch, err := c.Next(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		inBuf := len(ch) > 0 && bufCap > 0 && &ch[0] == &buf[:1][0]
		fits := len(ch) <= bufCap
		if inBuf && cap(ch) != bufCap || !inBuf && cap(ch) == bufCap || !fits && inBuf {
			t.Fatalf("chunk %d of %d bytes, buffer of %d: in the buffer %v, capacity %d", len(got), len(ch), bufCap, inBuf, cap(ch))
		}
		if inBuf {
			off += len(ch)
		}
		chunks = append(chunks, ch)
		got = append(got, len(ch))
		moved = append(moved, fits && !inBuf)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("cuts %v, restic/chunker %v", got, want)
	}
	if joined := bytes.Join(chunks, nil); !bytes.Equal(joined, data) {
		t.Fatalf("the %d chunks held to the end do not concatenate to the %d bytes cut (a later Next overwrote one?)", len(chunks), len(data))
	}
	for i, m := range moved {
		last := i == len(moved)-1 && got[i] == bufCap
		if m && bufCap >= lookAhead && !last {
			t.Fatalf("chunk %d of %d (cuts %v) fits its buffer of %d but was moved out of it", i, got[i], got, bufCap)
		}
	}
}

// polOfDegree returns an irreducible polynomial of degree d drawn from r.
func polOfDegree(t testing.TB, r *rand.Rand, d int) chunk.Pol {
	t.Helper()
	for range 1_000_000 {
		p := chunk.Pol(r.Uint64()&(1<<d-1) | 1<<d | 1)
		if p.Irreducible() {
			return p
		}
	}
	t.Fatalf("no irreducible polynomial of degree %d found", d)
	return 0
}

// plantCut returns random bytes with cuts unlikely anywhere (a 26-bit mask)
// but certain at end offset e of a chunk starting at 0: the 64 bytes before
// e are zeros, whose fingerprint is zero, after a byte that is not.
func plantCut(r *rand.Rand, n, e int) []byte {
	b := seedtest.Bytes(r, n)
	clear(b[e-64 : e])
	b[e-65] |= 1
	return b
}

// The cut is found exactly where it is, at and around the lane and block
// boundaries of the four-lane scan (8 KiB lanes, 32 KiB blocks, counted
// from the minimum) and the 128 KiB reads, for every way the reader
// splits its reads, with or without Start, in buffers smaller and larger
// than the chunks.
func TestCutAtLaneBoundaries(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	const lane, block, read = 8 << 10, 32 << 10, 128 << 10
	p := chunk.Params{Min: 4096 + 64, Max: 1 << 20, AverageBits: 26}
	pol := polOfDegree(t, r, 53)
	var ends []int
	for _, at := range []int{0, lane, 2 * lane, 3 * lane, block, 2 * block, 3 * block, 4 * block, 5 * block, read - int(p.Min), read, 2 * read, 2*read - int(p.Min)} {
		for _, d := range []int{-1, 0, 1} {
			if e := int(p.Min) + at + d; e >= int(p.Min) {
				ends = append(ends, e)
			}
		}
	}
	ends = append(ends, int(p.Max)-1, int(p.Max))
	for _, e := range ends {
		for _, n := range []int{e, e + 1, e + 100<<10} {
			// A cut in the random bytes before e is unlikely (a 26-bit
			// mask) but possible: draw them again.
			var data []byte
			var want []int
			for range 20 {
				data = plantCut(r, n, e)
				if want = resticCuts(t, data, pol, p); want[0] == e {
					break
				}
			}
			if want[0] != e {
				t.Fatalf("planted a cut at %d, restic/chunker cut %v", e, want)
			}
			c := chunk.New(nil, pol, p)
			for _, step := range []int{1 << 30, 1000, 32<<10 + 1} {
				start := step == 1000
				name := fmt.Sprintf("cut at %d of %d bytes, reads of %d, Start %v", e, n, step, start)
				t.Run(name, func(t *testing.T) {
					checkCuts(t, c, &stepReader{b: data, step: step, eofWithData: start}, data, 200<<10, start, want)
				})
			}
		}
	}
}

// The corners of the allowed parameters and polynomials: degrees 8 and 53,
// average bits 10 and 26, Min = Max = 64, a maximum below one read (so a
// chunk is cut at Max from data already read), and a minimum above one
// read; readers that return their last bytes with io.EOF, short reads and
// one byte at a time.
func TestSameCutsAsResticAtTheLimits(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	params := []chunk.Params{
		{Min: 64, Max: 64, AverageBits: 10},
		{Min: 64, Max: 64, AverageBits: 26},
		{Min: 64, Max: 65, AverageBits: 10},
		{Min: 64, Max: 100, AverageBits: 26},
		{Min: 64, Max: 40 << 10, AverageBits: 10},
		{Min: 64, Max: 100 << 10, AverageBits: 26},
		{Min: 200 << 10, Max: 200<<10 + 64, AverageBits: 10},
		{Min: 100 << 10, Max: 1 << 20, AverageBits: 10},
		{Min: 64, Max: 2 << 20, AverageBits: 26},
	}
	for _, deg := range []int{8, 8 + r.IntN(46), 53} {
		pol := polOfDegree(t, r, deg)
		for _, p := range params {
			n := min(6*int(p.Max)+r.IntN(int(p.Max)), 300<<10+r.IntN(300<<10))
			for kind, data := range map[string][]byte{"random": seedtest.Bytes(r, n), "zeros": make([]byte, n), "low-entropy": lowEntropy(r, n)} {
				want := resticCuts(t, data, pol, p)
				c := chunk.New(nil, pol, p)
				for _, step := range []int{1 << 30, 1, 128<<10 + 7} {
					if step == 1 && n > 64<<10 {
						step = 4093
					}
					for _, bufCap := range []int{100, lookAhead, int(p.Max)} {
						t.Run(fmt.Sprintf("degree %d %+v %s reads of %d buffer %d", deg, p, kind, step, bufCap), func(t *testing.T) {
							checkCuts(t, c, &stepReader{b: data, step: step, eofWithData: bufCap == 100}, data, bufCap, step == 4093, want)
						})
					}
				}
			}
		}
	}
}

func lowEntropy(r *rand.Rand, n int) []byte {
	b := seedtest.Bytes(r, n)
	for i := range b {
		b[i] &= 1
	}
	return b
}

// Alloc's buffer is used only when it is large enough: too small, nil or
// one with bytes in it, the chunk still comes out whole and in place.
func TestAllocTooSmallOrNil(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 3<<20)
	pol := polOfDegree(t, r, 53)
	p := chunk.Params{Min: 64 << 10, Max: 1 << 20, AverageBits: 18}
	want := resticCuts(t, data, pol, p)
	allocs := map[string]func(n int) []byte{
		"nil":       func(int) []byte { return nil },
		"short":     func(n int) []byte { return make([]byte, 0, n-1) },
		"non-empty": func(n int) []byte { return bytes.Repeat([]byte{0xee}, n) },
		"larger":    func(n int) []byte { return make([]byte, 0, 3*n) },
	}
	for name, alloc := range allocs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := chunk.New(nil, pol, p)
			c.Alloc = alloc
			checkCuts(t, c, bytes.NewReader(data), data, 4096, false, want)
		})
	}
}
