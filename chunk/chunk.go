package chunk

import (
	"fmt"
	"io"

	"github.com/restic/chunker"
)

// Pol is a chunker polynomial. It is secret: never log it.
type Pol = chunker.Pol

// Params are the chunk size bounds.
type Params struct {
	Min         uint `json:"min"`
	Max         uint `json:"max"`
	AverageBits int  `json:"average_bits"`
}

// DefaultParams are the sizes new repositories use (see the package doc).
var DefaultParams = Params{Min: 256 << 10, Max: 8 << 20, AverageBits: 19}

// Validate refuses sizes the chunker cannot use.
func (p Params) Validate() error {
	if p.Min < 64 || p.Max < p.Min || p.Max > 64<<20 || p.AverageBits < 10 || p.AverageBits > 26 {
		return fmt.Errorf("invalid chunker parameters min=%d max=%d average_bits=%d", p.Min, p.Max, p.AverageBits)
	}
	return nil
}

// RandomPol returns a fresh random irreducible polynomial of degree 53.
func RandomPol() (Pol, error) { return chunker.RandomPolynomial() }

// readSize is how much Next reads at a time. Bytes read past a cut are
// copied out and into the next chunk's buffer, half a read on average, so
// a smaller read copies less; 128 KiB keeps the reads few.
const readSize = 128 << 10

// Chunker cuts one stream at a time; Reset starts the next. Not safe for
// concurrent use: make one per goroutine.
//
// Its cuts are restic/chunker's for the same polynomial and sizes (the
// tests check them against it), found faster (see tables.cut), and it reads
// the stream straight into the chunk's buffer instead of copying every
// byte from a buffer of its own.
type Chunker struct {
	// Alloc, if set, returns an empty buffer of at least n bytes for a
	// chunk that outgrows the buffer Next was given (a pool's, say);
	// otherwise Next allocates one.
	Alloc func(n int) []byte

	rd   io.Reader
	p    Params
	mask uint64
	tab  *tables
	err  error // the polynomial's, returned by Next

	carry []byte // bytes read past the last cut: the next chunk's first
	spare []byte // the array carry is copied into (Start's carry is head)
	eof   bool   // rd is done: the next chunk is the last
	rerr  error  // rd's read error, returned by Next until Reset
}

// New returns a Chunker for pol and p, reading from r.
func New(r io.Reader, pol Pol, p Params) *Chunker {
	tab, err := tablesFor(pol)
	c := &Chunker{p: p, mask: 1<<p.AverageBits - 1, tab: tab, err: err}
	c.Reset(r)
	return c
}

// Reset points the chunker at a new stream, keeping its tables.
func (c *Chunker) Reset(r io.Reader) {
	c.rd, c.carry, c.eof, c.rerr = r, nil, false, nil
}

// MinSize is the minimum chunk size: a stream no longer than it is one
// chunk, whatever the polynomial.
func (c *Chunker) MinSize() int { return int(c.p.Min) }

// Start begins cutting rd, reading its first MinSize bytes into head
// (which must have room for them). A stream no longer than that is one
// chunk whatever the polynomial, and most files are: Start returns it
// (empty for an empty stream) with done set, and the chunker, with its
// copy, is not used. Otherwise Next cuts the stream, head's bytes first,
// and head must stay untouched until the first Next returns.
func (c *Chunker) Start(rd io.Reader, head []byte) (whole []byte, done bool, err error) {
	n, eof, err := readFull(rd, head[:c.MinSize()])
	switch {
	case err != nil:
		return nil, false, err
	case eof:
		return head[:n], true, nil
	}
	c.Reset(rd)
	c.carry = head[:n]
	return nil, false, nil
}

// BufSize is the buffer size Next needs: the maximum chunk size.
func (c *Chunker) BufSize() int { return int(c.p.Max) }

// Next returns the next chunk, or io.EOF after the last one. After a read
// error it returns that error until Reset or Start. The chunk is
// stored in buf when it fits; otherwise Next grows it, up to BufSize
// bytes, and the chunk is in the new array. (Two exceptions move a chunk
// that fits: a last chunk that fills buf exactly, as the stream's end is
// seen only after buf grew for more, and a buf too small for the bytes
// read past the previous cut, at most 160 KiB.) The chunk's capacity is
// its array's, so a caller can tell whether buf was used.
func (c *Chunker) Next(buf []byte) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.rerr != nil {
		// The carry and the bytes read with the error are gone: going on
		// would cut chunks that silently miss them.
		return nil, c.rerr
	}
	lo, hi := int(c.p.Min), int(c.p.Max)
	data := append(buf[:0], c.carry...)
	c.carry = nil
	from := lo // the first end offset not yet looked at
	for {
		if to := min(len(data), hi); to >= from {
			// A full buffer is looked at to its end before it grows, so a
			// chunk that fits it stays in it.
			full := len(data) == cap(data)
			e, next := c.tab.cut(data, from, to, c.mask, c.eof || to == hi || full)
			if e >= 0 {
				return c.split(data, e), nil
			}
			if to == hi {
				return c.split(data, hi), nil
			}
			from = next
		}
		if c.eof {
			if len(data) == 0 {
				return nil, io.EOF
			}
			return data, nil
		}
		n := min(readSize, hi-len(data))
		if len(data) == cap(data) {
			data = c.grow(data, n)
		}
		n = min(n, cap(data)-len(data)) // the buffer grows only once full
		m, eof, err := readFull(c.rd, data[len(data):len(data)+n])
		if err != nil {
			c.rerr = err
			return nil, err
		}
		data = data[:len(data)+m]
		c.eof = eof
	}
}

// readFull reads into p until it is full or r ends. Only io.EOF itself, as
// io.Reader's contract has it, ends it: io.ReadFull's io.ErrUnexpectedEOF
// cannot be told apart from the same error returned by r (compress/flate on
// a truncated stream, a pipe closed with a truncated pack's error), and a
// wrapped io.EOF is some inner read's, both failures to pass on, not ends.
func readFull(r io.Reader, p []byte) (n int, eof bool, err error) {
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		switch {
		case err == io.EOF:
			return n, true, nil
		case err != nil:
			return n, false, err
		}
	}
	return n, false, nil
}

// split keeps data's bytes after e for the next chunk and returns the
// chunk before it.
func (c *Chunker) split(data []byte, e int) []byte {
	c.spare = append(c.spare[:0], data[e:]...)
	c.carry = c.spare
	return data[:e]
}

// grow returns data with room for n more bytes, moved to a larger buffer
// (twice the size, at most the maximum chunk size) if it has too little.
func (c *Chunker) grow(data []byte, n int) []byte {
	if len(data)+n <= cap(data) {
		return data
	}
	size := min(max(2*cap(data), len(data)+n), int(c.p.Max))
	var g []byte
	if c.Alloc != nil {
		g = c.Alloc(size)
	}
	if cap(g) < size {
		g = make([]byte, 0, size)
	}
	return append(g[:0], data...)
}
