package chunk

import (
	"bytes"
	"errors"
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

// Chunker cuts one stream at a time; Reset starts the next. Not safe for
// concurrent use: make one per goroutine.
type Chunker struct {
	c   *chunker.Chunker
	pol Pol
	p   Params
}

// New returns a Chunker for pol and p, reading from r.
func New(r io.Reader, pol Pol, p Params) *Chunker {
	c := &Chunker{c: chunker.NewWithBoundaries(r, pol, p.Min, p.Max), pol: pol, p: p}
	c.c.SetAverageBits(p.AverageBits)
	return c
}

// Reset points the chunker at a new stream, keeping its tables.
func (c *Chunker) Reset(r io.Reader) {
	c.c.ResetWithBoundaries(r, c.pol, c.p.Min, c.p.Max)
	c.c.SetAverageBits(c.p.AverageBits)
}

// MinSize is the minimum chunk size: a stream no longer than it is one
// chunk, whatever the polynomial.
func (c *Chunker) MinSize() int { return int(c.p.Min) }

// Start begins cutting rd, reading its first MinSize bytes into head
// (which must have room for them). A stream no longer than that is one
// chunk whatever the polynomial, and most files are: Start returns it
// (empty for an empty stream) with done set, and the chunker, with its
// copy, is not used. Otherwise Next cuts the stream, head's bytes first,
// and head must stay untouched until the stream is done.
func (c *Chunker) Start(rd io.Reader, head []byte) (whole []byte, done bool, err error) {
	n, err := io.ReadFull(rd, head[:c.MinSize()])
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return head[:n], true, nil
	case err != nil:
		return nil, false, err
	}
	c.Reset(io.MultiReader(bytes.NewReader(head[:n]), rd))
	return nil, false, nil
}

// BufSize is the buffer size Next needs: the maximum chunk size.
func (c *Chunker) BufSize() int { return int(c.p.Max) }

// Next returns the next chunk, or io.EOF after the last one. The chunk is
// stored in buf when it fits; otherwise Next grows it by append, up to
// BufSize bytes, and the chunk is in the new array.
func (c *Chunker) Next(buf []byte) ([]byte, error) {
	ch, err := c.c.Next(buf)
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, err
	}
	return ch.Data, nil
}
