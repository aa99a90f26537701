package bench

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Kinds of bytes a section of a generated file holds.
const (
	kindText   = iota // words from a vocabulary: compresses 3-4x
	kindCode          // machine-code-like: a few frequent opcodes and random immediates, about 1.5-2x
	kindRandom        // incompressible
	kindZero          // padding, .bss
	kindFloat         // float32 arrays: random mantissas, few exponents, about 1.5x
)

// section is a run of n bytes of one kind, in vocab when it is text.
type section struct {
	kind  int
	n     int
	vocab *[32]string
}

// filler writes files of generated sections through one reused buffer:
// a PCG stream for structure and text, a ChaCha8 stream for random bytes,
// so a seed fixes every byte and no file is held in memory.
type filler struct {
	rng  *rand.Rand
	src  *rand.ChaCha8
	buf  []byte
	dirs map[string]bool
}

func newFiller(seed, stream uint64) *filler {
	rng := rand.New(rand.NewPCG(seed, stream))
	var key [32]byte
	for i := 0; i < 32; i += 8 {
		binary.LittleEndian.PutUint64(key[i:], rng.Uint64())
	}
	return &filler{rng: rng, src: rand.NewChaCha8(key), buf: make([]byte, 1<<20), dirs: map[string]bool{}}
}

// mkdirAll makes dir once per filler.
func (g *filler) mkdirAll(dir string) error {
	if g.dirs[dir] {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g.dirs[dir] = true
	return nil
}

// create writes a new file at p with mode (umask aside) from secs.
func (g *filler) create(p string, mode os.FileMode, secs ...section) error {
	if err := g.mkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	err = g.write(f, secs)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// write writes secs to f at its offset, a buffer at a time.
func (g *filler) write(f *os.File, secs []section) error {
	for _, s := range secs {
		for left := s.n; left > 0; {
			b := g.buf[:min(left, len(g.buf))]
			g.fill(b, s)
			if _, err := f.Write(b); err != nil {
				return err
			}
			left -= len(b)
		}
	}
	return nil
}

func (g *filler) fill(b []byte, s section) {
	switch s.kind {
	case kindText:
		g.fillText(b, s.vocab)
	case kindCode:
		g.fillCode(b)
	case kindRandom:
		_, _ = g.src.Read(b) // never fails
	case kindZero:
		clear(b)
	case kindFloat:
		g.fillFloat(b)
	}
}

// fillText fills b with words of vocab, one line break in eight
// separators: eight words per random number.
func (g *filler) fillText(b []byte, vocab *[32]string) {
	for i := 0; i < len(b); {
		v := g.rng.Uint64()
		for j := 0; j < 8 && i < len(b); j++ {
			i += copy(b[i:], vocab[v&31])
			if i < len(b) {
				b[i] = ' '
				if (v>>5)&7 == 0 {
					b[i] = '\n'
				}
				i++
			}
			v >>= 8
		}
	}
}

// opcodes are the bytes fillCode repeats (prefixes, mov, call, ret, ...).
var opcodes = [8]byte{0x48, 0x89, 0x8b, 0xe8, 0x0f, 0x00, 0xff, 0xc3}

// fillCode fills b like machine code: in three 8-byte groups of four,
// bytes from opcodes; in the fourth, random bytes (addresses, immediates).
func (g *filler) fillCode(b []byte) {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		v := g.rng.Uint64()
		if v&3 == 0 {
			binary.LittleEndian.PutUint64(w[:], g.rng.Uint64())
		} else {
			for j := range w {
				w[j] = opcodes[(v>>(2+3*j))&7]
			}
		}
		copy(b[i:], w[:])
	}
}

// fillFloat fills b like an array of float32 of similar magnitude.
func (g *filler) fillFloat(b []byte) {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		v := g.rng.Uint64()
		w[0], w[1], w[2], w[3] = byte(v), byte(v>>8), 0x80|byte(v>>16)&7, 0x3f+byte(v>>19)&1
		w[4], w[5], w[6], w[7] = byte(v>>24), byte(v>>32), 0x80|byte(v>>40)&7, 0x3f+byte(v>>43)&1
		copy(b[i:], w[:])
	}
}

// logSize returns a size from lo to hi, log-distributed with the exponent
// u^skew (skew above 1 makes small sizes more frequent).
func (g *filler) logSize(lo, hi int, skew float64) int {
	x := math.Pow(g.rng.Float64(), skew)
	return int(float64(lo) * math.Pow(float64(hi)/float64(lo), x))
}
