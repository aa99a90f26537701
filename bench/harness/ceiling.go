package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/chunk"
	"lifeboat/crypt"
	"lifeboat/pack"
)

// The save path's stages, in order, as the ceiling measures them.
const (
	StageRead     = "read"      // open, read and close each file
	StageChunk    = "chunk"     // content-defined chunking (package chunk, restic/chunker's cuts) of files above the minimum chunk size
	StageID       = "id"        // keyed BLAKE3 id of each chunk
	StageCompress = "compress"  // zstd at the default level, by SealBlob's rules
	StageEncrypt  = "encrypt"   // XChaCha20-Poly1305
	StageVerify   = "verify"    // open, decompress and compare each sealed blob
	StagePackHash = "pack hash" // BLAKE3 over the sealed bytes (a pack's name)
)

// Stages lists the stages in the save path's order.
var Stages = []string{StageRead, StageChunk, StageID, StageCompress, StageEncrypt, StageVerify, StagePackHash}

// StageTime is one stage's share of a Ceiling.
type StageTime struct {
	Name string `json:"name"`
	// Seconds is the time the workers spent in the stage, summed: the
	// stage's CPU cost for the whole corpus.
	Seconds float64 `json:"seconds"`
	// MBps is the corpus's bytes over Seconds spread on all cores: what
	// the stage alone would allow.
	MBps float64 `json:"mb_per_s"`
}

// Ceiling is what the save path's stages allow on this machine for one
// corpus: each stage of a first capture (the file reads, chunking, ids,
// compression, encryption, the verification the format requires and
// the pack hash) is timed while one worker per core runs them all, file
// by file, the way a capture does, with duplicate chunks skipped after
// their id. What a capture does beyond these stages (walking and
// stat'ing the tree, metadata, trees, the index, writing and syncing
// packs, scheduling, garbage collection) is left out, so the ceiling is
// an upper bound no capture can reach.
type Ceiling struct {
	Round int   `json:"round"`
	Procs int   `json:"procs"`
	Bytes int64 `json:"bytes"`
	Files int   `json:"files"`
	// Blobs counts the distinct chunks: those compressed, sealed and
	// verified.
	Blobs  int         `json:"blobs"`
	Stages []StageTime `json:"stages"`
	// Seconds is every stage's Seconds summed and spread on all cores:
	// the wall time the stages need together. MBps is Bytes over it.
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"`
	// Measured holds the MBps of the two measurements a round's ceiling
	// is made of (bracketCeiling): before and after the capture.
	Measured []float64 `json:"measured_mb_per_s,omitempty"`
}

// Slowest is the stage that allows the least on its own.
func (c Ceiling) Slowest() StageTime {
	var s StageTime
	for _, st := range c.Stages {
		if s.Name == "" || st.Seconds > s.Seconds {
			s = st
		}
	}
	return s
}

// MeasureCeiling measures the Ceiling of the corpus under dir with one
// worker per GOMAXPROCS, fresh random keys and chunker polynomial, and
// the default chunk sizes and compression. The files should be in the
// page cache (the harness warms them), as they are for the captures.
func MeasureCeiling(ctx context.Context, dir string) (Ceiling, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return Ceiling{}, fmt.Errorf("list the corpus for the stage ceiling: %w", err)
	}
	keys, err := crypt.NewMasterKeys().Tier(blob.Workspace)
	if err != nil {
		return Ceiling{}, err
	}
	pol, err := chunk.RandomPol()
	if err != nil {
		return Ceiling{}, err
	}
	procs := runtime.GOMAXPROCS(0)
	ws := make([]ceilingWorker, procs)
	var next atomic.Int64
	var seen sync.Map // blob.ID -> struct{}
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range ws {
		w := &ws[i]
		w.keys, w.seen = keys, &seen
		w.c = chunk.New(nil, pol, chunk.DefaultParams)
		w.buf = make([]byte, w.c.BufSize())
		w.head = make([]byte, w.c.MinSize())
		w.hash = blake3.New()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= len(files) {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[i] = err
					return
				}
				if err := w.file(files[n]); err != nil {
					errs[i] = fmt.Errorf("stage ceiling: %w", err)
					next.Store(int64(len(files))) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Ceiling{}, err
	}
	c := Ceiling{Procs: procs, Files: len(files)}
	var sum [nStages]time.Duration
	for _, w := range ws {
		c.Bytes += w.bytes
		c.Blobs += w.blobs
		for s := range sum {
			sum[s] += w.t[s]
		}
	}
	for s, name := range Stages {
		c.Stages = append(c.Stages, StageTime{Name: name, Seconds: sum[s].Seconds()})
	}
	c.total()
	return c, nil
}

// total sets each stage's MBps and the ceiling's Seconds and MBps from
// the stages' Seconds, Bytes and Procs.
func (c *Ceiling) total() {
	c.Seconds = 0
	for i := range c.Stages {
		st := &c.Stages[i]
		wall := st.Seconds / float64(max(c.Procs, 1))
		st.MBps = div(float64(c.Bytes)/1e6, wall)
		c.Seconds += wall
	}
	c.MBps = div(float64(c.Bytes)/1e6, c.Seconds)
}

// bracketCeiling is a round's ceiling from the measurements right before
// and right after Lifeboat's first capture: each stage's time is the mean
// of the two (medianCeiling of two), so the ceiling's MB/s is the
// harmonic mean of theirs. Measured keeps both MB/s.
func bracketCeiling(before, after Ceiling) Ceiling {
	c := medianCeiling([]Ceiling{before, after})
	c.Measured = []float64{before.MBps, after.MBps}
	return c
}

const nStages = 7

// Indexes into ceilingWorker.t, in the order of Stages.
const (
	iRead = iota
	iChunk
	iID
	iCompress
	iEncrypt
	iVerify
	iPackHash
)

// ceilingWorker runs every stage on the files it takes and times each.
type ceilingWorker struct {
	keys  *crypt.TierKeys
	seen  *sync.Map
	c     *chunk.Chunker
	buf   []byte
	head  []byte // a file's first MinSize bytes
	hash  *blake3.Hasher
	t     [nStages]time.Duration
	bytes int64
	blobs int
}

// timedReader adds the time spent in Read to *d.
type timedReader struct {
	f *os.File
	d *time.Duration
}

func (r timedReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := r.f.Read(p)
	*r.d += time.Since(start)
	return n, err
}

// file runs the stages on one file.
func (w *ceilingWorker) file(p string) (err error) {
	start := time.Now()
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOCTTY, 0)
	w.t[iRead] += time.Since(start)
	if err != nil {
		return err
	}
	defer func() {
		start := time.Now()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		w.t[iRead] += time.Since(start)
	}()
	// As repo.SaveStream does: a file no longer than the minimum chunk
	// size is one chunk, read without the chunker.
	whole, done, err := w.c.Start(timedReader{f, &w.t[iRead]}, w.head)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", p, err)
	case done && len(whole) == 0:
		return nil
	case done:
		w.bytes += int64(len(whole))
		if err := w.chunk(whole, time.Now()); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
	for {
		t0, read0 := time.Now(), w.t[iRead]
		data, err := w.c.Next(w.buf)
		t1 := time.Now()
		w.t[iChunk] += t1.Sub(t0) - (w.t[iRead] - read0)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		w.bytes += int64(len(data))
		if err := w.chunk(data, t1); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
}

// chunk runs the stages after chunking on one chunk; t0 is now.
func (w *ceilingWorker) chunk(data []byte, t0 time.Time) error {
	id := w.keys.BlobID(data)
	t1 := time.Now()
	w.t[iID] += t1.Sub(t0)
	if _, dup := w.seen.LoadOrStore(id, struct{}{}); dup {
		return nil
	}
	w.blobs++
	t1 = time.Now() // the lookup is not one of the stages
	payload, flags, err := pack.Compress(data, pack.CompressFastest)
	if err != nil {
		return err
	}
	t2 := time.Now()
	sealed := pack.Seal(pack.GetBuffer(len(payload)+crypt.Overhead), w.keys, blob.Data, id, flags, payload)
	t3 := time.Now()
	err = pack.VerifySealed(w.keys, blob.Data, id, flags, sealed, data)
	t4 := time.Now()
	_, _ = w.hash.Write(sealed)
	t5 := time.Now()
	w.t[iCompress] += t2.Sub(t1)
	w.t[iEncrypt] += t3.Sub(t2)
	w.t[iVerify] += t4.Sub(t3)
	w.t[iPackHash] += t5.Sub(t4)
	if flags&pack.FlagZstd != 0 {
		pack.PutBuffer(payload)
	}
	pack.PutBuffer(sealed)
	return err
}
