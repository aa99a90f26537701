package prune

import (
	"bufio"
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"lifeboat/blob"
)

// keySize is a blob key: tier || type || id, the order of the local index.
const keySize = 2 + blob.IDSize

type key [keySize]byte

func makeKey(t blob.Tier, typ blob.Type, id blob.ID) key {
	var k key
	k[0], k[1] = byte(t), byte(typ)
	copy(k[2:], id[:])
	return k
}

// liveSet is a set of blob keys kept on disk as sorted runs: Add buffers
// runKeys keys in memory, then sorts and writes them to a file; Iter
// merges the runs in key order without duplicates. Memory is bounded by
// the buffer, whatever the number of blobs.
type liveSet struct {
	dir     string
	runKeys int
	buf     []key
	runs    []string
	added   int
}

// liveRunPattern names the live set's run files in the scratch directory.
const liveRunPattern = "live-*.run"

// defaultRunKeys keys (34 bytes each, about 8.5 MiB) are sorted in memory at a time.
const defaultRunKeys = 256 << 10

func newLiveSet(dir string, runKeys int) *liveSet {
	return &liveSet{dir: dir, runKeys: runKeys}
}

func (s *liveSet) Add(k key) error {
	s.buf = append(s.buf, k)
	s.added++
	if len(s.buf) >= s.runKeys {
		return s.flush()
	}
	return nil
}

func (s *liveSet) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	slices.SortFunc(s.buf, func(a, b key) int { return bytes.Compare(a[:], b[:]) })
	s.buf = slices.Compact(s.buf)
	f, err := os.CreateTemp(s.dir, liveRunPattern)
	if err != nil {
		return fmt.Errorf("live set: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	for i := range s.buf {
		_, _ = w.Write(s.buf[i][:])
	}
	err = errors.Join(w.Flush(), f.Close())
	s.runs = append(s.runs, f.Name())
	s.buf = s.buf[:0]
	return err
}

// Iter returns an iterator over the set in key order. Call after the last Add.
func (s *liveSet) Iter() (*liveIter, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
	it := &liveIter{}
	for _, name := range s.runs {
		f, err := os.Open(name)
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("live set: %w", err)
		}
		r := &runReader{f: f, r: bufio.NewReaderSize(f, 1<<16)}
		it.files = append(it.files, f)
		if ok, err := r.next(); err != nil {
			it.Close()
			return nil, err
		} else if ok {
			it.h = append(it.h, r)
		}
	}
	heap.Init(&it.h)
	return it, nil
}

// Remove deletes the run files.
func (s *liveSet) Remove() {
	for _, name := range s.runs {
		_ = os.Remove(name)
	}
	s.runs, s.buf = nil, nil
}

type runReader struct {
	f   *os.File
	r   *bufio.Reader
	cur key
}

func (r *runReader) next() (bool, error) {
	_, err := io.ReadFull(r.r, r.cur[:])
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("live set %s: %w", filepath.Base(r.f.Name()), err)
	}
	return true, nil
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return bytes.Compare(h[i].cur[:], h[j].cur[:]) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// liveIter yields the keys of a liveSet in order, each once.
type liveIter struct {
	h     runHeap
	files []*os.File
	last  key
	some  bool
}

// Next returns the next key, or false at the end.
func (it *liveIter) Next() (key, bool, error) {
	for len(it.h) > 0 {
		top := it.h[0]
		k := top.cur
		ok, err := top.next()
		if err != nil {
			return key{}, false, err
		}
		if ok {
			heap.Fix(&it.h, 0)
		} else {
			heap.Pop(&it.h)
		}
		if it.some && k == it.last {
			continue
		}
		it.last, it.some = k, true
		return k, true, nil
	}
	return key{}, false, nil
}

func (it *liveIter) Close() {
	for _, f := range it.files {
		_ = f.Close()
	}
	it.files, it.h = nil, nil
}
