package chunk_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/restic/chunker"

	"lifeboat/chunk"
	"lifeboat/internal/seedtest"
)

// testPol is the polynomial restic's chunker tests use; it is irreducible.
const testPol = chunk.Pol(0x3DA3358B4DC173)

// randPol returns an irreducible polynomial of degree 53 drawn from r.
func randPol(t testing.TB, r *rand.Rand) chunk.Pol {
	t.Helper()
	for range 100_000 {
		p := chunk.Pol(r.Uint64()&(1<<53-1) | 1<<53 | 1)
		if p.Irreducible() {
			return p
		}
	}
	t.Fatal("no irreducible polynomial found")
	return 0
}

// cuts chunks data into one maximum-size buffer and returns the chunk
// lengths, checking that the chunks concatenate to data.
func cuts(t testing.TB, c *chunk.Chunker, data []byte) []int {
	t.Helper()
	buf := make([]byte, c.BufSize())
	return cutsInto(t, c, data, func() []byte { return buf })
}

// cutsInto is cuts with each chunk in the buffer buf returns.
func cutsInto(t testing.TB, c *chunk.Chunker, data []byte, buf func() []byte) []int {
	t.Helper()
	var lens []int
	var joined []byte
	for {
		ch, err := c.Next(buf())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lens = append(lens, len(ch))
		joined = append(joined, ch...)
	}
	if !bytes.Equal(joined, data) {
		t.Fatalf("chunks of %d bytes concatenate to %d different bytes", len(data), len(joined))
	}
	return lens
}

// smallParams keep the chunk count high on small inputs.
var smallParams = chunk.Params{Min: 2 << 10, Max: 64 << 10, AverageBits: 13}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 8<<20)
	for _, p := range []chunk.Params{chunk.DefaultParams, smallParams} {
		a := cuts(t, chunk.New(bytes.NewReader(data), testPol, p), data)
		b := cuts(t, chunk.New(bytes.NewReader(data), testPol, p), data)
		if !slices.Equal(a, b) {
			t.Fatalf("%+v: same input, polynomial and params gave different cuts", p)
		}
		// The reader's read sizes must not matter.
		c := cuts(t, chunk.New(io.LimitReader(&oneByteReader{data}, int64(len(data))), testPol, p), data)
		if !slices.Equal(a, c) {
			t.Fatalf("%+v: cuts depend on how the reader splits its reads", p)
		}
	}
}

type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), 1+len(r.b)%4093)
	n = copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

func TestDifferentPolDifferentCuts(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 8<<20)
	other := randPol(t, r)
	if other == testPol {
		t.Skip("drew the test polynomial")
	}
	for _, p := range []chunk.Params{chunk.DefaultParams, smallParams} {
		a := cuts(t, chunk.New(bytes.NewReader(data), testPol, p), data)
		b := cuts(t, chunk.New(bytes.NewReader(data), other, p), data)
		if slices.Equal(a, b) {
			t.Fatalf("%+v: polynomials %v and %v cut 8 MiB identically", p, testPol, other)
		}
	}
}

func TestChunkSizes(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for _, p := range []chunk.Params{chunk.DefaultParams, smallParams, {Min: 64, Max: 64, AverageBits: 10}, {Min: 4096, Max: 8192, AverageBits: 20}} {
		zeros := min(2*int(p.Max), 2<<20)
		n := 4<<20 + zeros + r.IntN(1<<20)
		data := seedtest.Bytes(r, n)
		// A run of zeros hashes to zero, a cut at every Min.
		clear(data[1<<20 : 1<<20+zeros])
		lens := cuts(t, chunk.New(bytes.NewReader(data), testPol, p), data)
		for i, l := range lens {
			if l > int(p.Max) || (l < int(p.Min) && i != len(lens)-1) || l == 0 {
				t.Fatalf("%+v: chunk %d of %d is %d bytes", p, i, len(lens), l)
			}
		}
		// When the cut mask rarely matches before Max, chunks stop at Max.
		if p.Max-p.Min < 1<<p.AverageBits/16 && !slices.Contains(lens, int(p.Max)) {
			t.Errorf("%+v: no chunk reached Max", p)
		}
		if !slices.Contains(lens, int(p.Min)) {
			t.Errorf("%+v: no chunk was cut at Min in a run of zeros", p)
		}
		t.Logf("%+v: %d bytes in %d chunks", p, n, len(lens))
	}
}

func TestMeanChunkSize(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 16<<20)
	lens := cuts(t, chunk.New(bytes.NewReader(data), testPol, smallParams), data)
	mean := len(data) / len(lens)
	// Expected about Min + 2^AverageBits = 10 KiB.
	if want := int(smallParams.Min) + 1<<smallParams.AverageBits; mean < want/2 || mean > want*2 {
		t.Fatalf("mean chunk %d bytes, expected about %d", mean, want)
	}
}

func TestShortInputs(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for _, n := range []int{1, 63, 64, 1000, int(chunk.DefaultParams.Min) - 1, int(chunk.DefaultParams.Min)} {
		data := seedtest.Bytes(r, n)
		lens := cuts(t, chunk.New(bytes.NewReader(data), testPol, chunk.DefaultParams), data)
		if len(lens) != 1 || lens[0] != n {
			t.Fatalf("%d-byte input cut into %v, want one chunk", n, lens)
		}
	}
}

func TestEmptyInput(t *testing.T) {
	t.Parallel()
	c := chunk.New(strings.NewReader(""), testPol, chunk.DefaultParams)
	buf := make([]byte, c.BufSize())
	for range 3 {
		if ch, err := c.Next(buf); err != io.EOF || ch != nil {
			t.Fatalf("Next on empty input = %d bytes, %v; want nil, io.EOF", len(ch), err)
		}
	}
}

func TestEOFAfterLastChunk(t *testing.T) {
	t.Parallel()
	c := chunk.New(strings.NewReader("tiny"), testPol, chunk.DefaultParams)
	buf := make([]byte, c.BufSize())
	if ch, err := c.Next(buf); err != nil || string(ch) != "tiny" {
		t.Fatalf("Next = %q, %v", ch, err)
	}
	for range 2 {
		if _, err := c.Next(buf); err != io.EOF {
			t.Fatalf("after the last chunk: %v, want io.EOF", err)
		}
	}
}

func TestReadErrorPassedOn(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	c := chunk.New(io.MultiReader(strings.NewReader("some bytes"), &errReader{boom}), testPol, chunk.DefaultParams)
	buf := make([]byte, c.BufSize())
	var err error
	for err == nil {
		_, err = c.Next(buf)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the reader's error", err)
	}
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

func TestReset(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	a, b := seedtest.Bytes(r, 3<<20), seedtest.Bytes(r, 2<<20)
	wantA := cuts(t, chunk.New(bytes.NewReader(a), testPol, smallParams), a)
	wantB := cuts(t, chunk.New(bytes.NewReader(b), testPol, smallParams), b)

	c := chunk.New(bytes.NewReader(a), testPol, smallParams)
	// Stop half-way through a, then reuse the chunker for b, empty, and a.
	buf := make([]byte, c.BufSize())
	for range 3 {
		if _, err := c.Next(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Reset(bytes.NewReader(b))
	if got := cuts(t, c, b); !slices.Equal(got, wantB) {
		t.Fatal("after Reset, cuts of b differ from a fresh chunker's")
	}
	c.Reset(strings.NewReader(""))
	if _, err := c.Next(buf); err != io.EOF {
		t.Fatalf("after Reset to empty input: %v", err)
	}
	c.Reset(bytes.NewReader(a))
	if got := cuts(t, c, a); !slices.Equal(got, wantA) {
		t.Fatal("after Reset, cuts of a differ from a fresh chunker's (average bits lost?)")
	}
}

func TestBufSize(t *testing.T) {
	t.Parallel()
	if got := chunk.New(nil, testPol, chunk.DefaultParams).BufSize(); got != 8<<20 {
		t.Fatalf("BufSize = %d", got)
	}
}

func TestParamsValidate(t *testing.T) {
	t.Parallel()
	if err := chunk.DefaultParams.Validate(); err != nil {
		t.Fatalf("DefaultParams: %v", err)
	}
	if p := chunk.DefaultParams; p.Min != 256<<10 || p.Max != 8<<20 || p.AverageBits != 19 {
		t.Fatalf("DefaultParams changed: %+v (chunk boundaries and dedup depend on them)", p)
	}
	cases := []struct {
		p     chunk.Params
		valid bool
	}{
		{chunk.Params{Min: 64, Max: 64, AverageBits: 10}, true},
		{chunk.Params{Min: 64, Max: 64 << 20, AverageBits: 26}, true},
		{chunk.Params{Min: 63, Max: 1 << 20, AverageBits: 19}, false},
		{chunk.Params{Min: 0, Max: 1 << 20, AverageBits: 19}, false},
		{chunk.Params{Min: 1 << 20, Max: 1<<20 - 1, AverageBits: 19}, false},
		{chunk.Params{Min: 1 << 20, Max: 64<<20 + 1, AverageBits: 19}, false},
		{chunk.Params{Min: 1 << 20, Max: 8 << 20, AverageBits: 9}, false},
		{chunk.Params{Min: 1 << 20, Max: 8 << 20, AverageBits: 27}, false},
		{chunk.Params{Min: 1 << 20, Max: 8 << 20, AverageBits: -1}, false},
		{chunk.Params{}, false},
	}
	for _, c := range cases {
		if err := c.p.Validate(); (err == nil) != c.valid {
			t.Errorf("%+v: Validate() = %v, want valid=%v", c.p, err, c.valid)
		}
	}
}

func TestRandomPol(t *testing.T) {
	t.Parallel()
	p, err := chunk.RandomPol()
	if err != nil {
		t.Fatal(err)
	}
	if p.Deg() != 53 || !p.Irreducible() {
		t.Fatalf("RandomPol gave %v of degree %d", p, p.Deg())
	}
	if q, _ := chunk.RandomPol(); q == p {
		t.Fatal("two random polynomials are equal")
	}
	if !testPol.Irreducible() || testPol.Deg() != 53 {
		t.Fatal("test polynomial is not irreducible of degree 53")
	}
}

func TestInvalidPolIsAnError(t *testing.T) {
	t.Parallel()
	for _, pol := range []chunk.Pol{0, 1 << 60} {
		c := chunk.New(strings.NewReader("some data"), pol, chunk.DefaultParams)
		if _, err := c.Next(make([]byte, c.BufSize())); err == nil || err == io.EOF {
			t.Errorf("polynomial %#x: Next = %v, want an error", uint64(pol), err)
		}
	}
}

// A buffer smaller than the chunks grows and gives the same cuts and bytes
// as a maximum-size one: SaveStream starts chunks in small pooled buffers,
// and grows them into pooled ones through Alloc (TestAllocTooSmallOrNil
// has Alloc's failures).
func TestSmallBufferGrows(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 12<<20)
	pol := randPol(t, r)
	want := cuts(t, chunk.New(bytes.NewReader(data), pol, chunk.DefaultParams), data)
	for _, withAlloc := range []bool{false, true} {
		c := chunk.New(bytes.NewReader(data), pol, chunk.DefaultParams)
		var asked []int
		if withAlloc {
			c.Alloc = func(n int) []byte {
				asked = append(asked, n)
				return make([]byte, 0, n)
			}
		}
		got := cutsInto(t, c, data, func() []byte { return make([]byte, 0, 4096) })
		if !slices.Equal(got, want) {
			t.Fatalf("Alloc %v: small buffers cut %v, full-size buffers %v", withAlloc, got, want)
		}
		if withAlloc && (len(asked) == 0 || slices.Max(asked) > c.BufSize()) {
			t.Fatalf("Alloc asked for %v, want some sizes, none above %d", asked, c.BufSize())
		}
	}
}

// Start hands back whole a stream no longer than the minimum, and
// otherwise leaves Next to cut exactly what it cuts without Start: for
// lengths below, at and above the minimum, an empty stream and one that
// fails.
func TestStart(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 40*int(smallParams.Min))
	c := chunk.New(nil, testPol, smallParams)
	head := make([]byte, c.MinSize())
	for _, n := range []int{0, 1, c.MinSize() - 1, c.MinSize(), c.MinSize() + 1, len(data)} {
		want := cuts(t, chunk.New(bytes.NewReader(data[:n]), testPol, smallParams), data[:n])
		whole, done, err := c.Start(&oneByteReader{data[:n]}, head)
		if err != nil {
			t.Fatal(err)
		}
		if n < c.MinSize() {
			if !done || !bytes.Equal(whole, data[:n]) || len(want) > 1 {
				t.Fatalf("%d bytes: done %v, %d bytes back, %d chunks by Next", n, done, len(whole), len(want))
			}
			continue
		}
		if done {
			t.Fatalf("%d bytes: done at the minimum or above", n)
		}
		if got := cuts(t, c, data[:n]); !slices.Equal(got, want) {
			t.Fatalf("%d bytes: cuts %v after Start, %v without", n, got, want)
		}
	}
	if _, _, err := c.Start(iotest.ErrReader(io.ErrClosedPipe), head); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a failing stream: %v", err)
	}
}

// resticCuts returns the chunk lengths restic/chunker cuts data into.
func resticCuts(t testing.TB, data []byte, pol chunk.Pol, p chunk.Params) []int {
	t.Helper()
	c := chunker.NewWithBoundaries(bytes.NewReader(data), pol, p.Min, p.Max)
	c.SetAverageBits(p.AverageBits)
	buf := make([]byte, p.Max)
	var lens []int
	for {
		ch, err := c.Next(buf)
		if err == io.EOF {
			return lens
		}
		if err != nil {
			t.Fatal(err)
		}
		lens = append(lens, int(ch.Length))
	}
}

// The cuts are restic/chunker's, whatever the polynomial, sizes, data and
// read sizes: on random bytes, on bytes of little entropy (many candidate
// cuts), on zeros (a cut at every minimum) and on text, with parameters
// from the smallest allowed to the defaults.
func TestSameCutsAsRestic(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	params := []chunk.Params{
		chunk.DefaultParams,
		smallParams,
		{Min: 64, Max: 64, AverageBits: 10},
		{Min: 64, Max: 300 << 10, AverageBits: 10},
		{Min: 1000, Max: 9000, AverageBits: 11},
		{Min: 100 << 10, Max: 200 << 10, AverageBits: 20},
	}
	kinds := map[string]func(n int) []byte{
		"random": func(n int) []byte { return seedtest.Bytes(r, n) },
		"low-entropy": func(n int) []byte {
			b := seedtest.Bytes(r, n)
			for i := range b {
				b[i] &= 3
			}
			return b
		},
		"zeros": func(n int) []byte { return make([]byte, n) },
		"text": func(n int) []byte {
			return []byte(strings.Repeat("func (c *Chunker) Next(buf []byte) ([]byte, error) {\n", n/53+1)[:n])
		},
	}
	for _, p := range params {
		for kind, gen := range kinds {
			pol := randPol(t, r)
			data := gen(r.IntN(int(p.Max)*6 + 1))
			want := resticCuts(t, data, pol, p)
			readers := map[string]io.Reader{
				"whole":    bytes.NewReader(data),
				"one-byte": io.LimitReader(&oneByteReader{data}, int64(len(data))),
				"half":     iotest.HalfReader(bytes.NewReader(data)),
			}
			for name, rd := range readers {
				if got := cuts(t, chunk.New(rd, pol, p), data); !slices.Equal(got, want) {
					t.Fatalf("%+v, %s data of %d bytes, %s reads: cuts %v, restic/chunker %v", p, kind, len(data), name, got, want)
				}
			}
			c := chunk.New(nil, pol, p)
			head := make([]byte, c.MinSize())
			whole, done, err := c.Start(bytes.NewReader(data), head)
			switch {
			case err != nil:
				t.Fatal(err)
			case done && (len(want) > 1 || !bytes.Equal(whole, data)):
				t.Fatalf("%+v, %s: Start took %d bytes whole, restic/chunker cuts %v", p, kind, len(whole), want)
			case !done:
				if got := cuts(t, c, data); !slices.Equal(got, want) {
					t.Fatalf("%+v, %s after Start: cuts %v, restic/chunker %v", p, kind, got, want)
				}
			}
		}
	}
}

// FuzzSameCutsAsRestic compares the cuts with restic/chunker's for fuzzed
// data, sizes, polynomials of every degree from 8 to 53, read sizes,
// buffer sizes, with and without Start.
func FuzzSameCutsAsRestic(f *testing.F) {
	f.Add([]byte("seed"), uint16(64), uint32(200), uint8(10), uint64(testPol), uint32(1<<20), uint32(4096), false)
	f.Add(bytes.Repeat([]byte{0}, 5000), uint16(100), uint32(1000), uint8(12), uint64(testPol), uint32(1000), uint32(0), true)
	f.Add([]byte("a longer seed of text, which repeats"), uint16(1000), uint32(100_000), uint8(15), uint64(testPol), uint32(8191), uint32(200<<10), false)
	f.Add([]byte("degree eight"), uint16(0), uint32(50_000), uint8(16), uint64(0x11b), uint32(1), uint32(70_000), true)
	f.Fuzz(func(t *testing.T, data []byte, lo uint16, span uint32, bits uint8, pol uint64, step, bufCap uint32, start bool) {
		// Maximum sizes reach past four lanes (32 KiB), so lanes are used.
		p := chunk.Params{Min: 64 + uint(lo)%4096, AverageBits: 10 + int(bits)%17}
		p.Max = p.Min + uint(span)%(160<<10)
		// Any value is made a polynomial of degree 8 to 53, so that every
		// degree is reached, not only the few values of such a degree.
		if d := chunk.Pol(pol).Deg(); d < 8 || d > 53 {
			d = 8 + int(pol%46)
			pol = pol>>6&(1<<d-1) | 1<<d
		}
		// A short input is stretched so that it has lanes to scan.
		for len(data) > 0 && len(data) < 3*int(p.Max) {
			data = append(data, data...)
		}
		want := resticCuts(t, data, chunk.Pol(pol), p)
		rd := &stepReader{b: data, step: 1 + int(step%(256<<10)), eofWithData: step%2 == 1}
		checkCuts(t, chunk.New(nil, chunk.Pol(pol), p), rd, data, int(bufCap%(uint32(p.Max)+1)), start, want)
	})
}
