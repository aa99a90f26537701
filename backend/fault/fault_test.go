package fault_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/backendtest"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
)

func newInner(t *testing.T) backend.Backend {
	t.Helper()
	b, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTransparent: with no faults the wrapper keeps the whole contract.
func TestTransparent(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend { return fault.Wrap(newInner(t)) })
}

func h(ft backend.FileType, i int) backend.Handle {
	return backend.Handle{Type: ft, Name: fmt.Sprintf("%064x", i)}
}

func TestNthSaveFails(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	boom := errors.New("boom")
	f := fb.Add(fault.OnSave).Nth(3).Fail(boom)
	for i := 1; i <= 5; i++ {
		err := fb.Save(t.Context(), h(backend.Pack, i), []byte("x"))
		if (i == 3) != (err != nil) || (err != nil && !errors.Is(err, boom)) {
			t.Errorf("Save #%d: %v", i, err)
		}
		_, serr := fb.Unwrap().Stat(t.Context(), h(backend.Pack, i))
		if (i == 3) != errors.Is(serr, backend.ErrNotFound) {
			t.Errorf("Save #%d stored: %v", i, serr)
		}
	}
	if f.Fired() != 1 {
		t.Errorf("Fired = %d, want 1", f.Fired())
	}
	fb.VerifyAllFired(t)
}

func TestTimesAndAlways(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	fb.Add(fault.OnSave).Match(backend.Index).Nth(2).Times(2).Fail(nil)
	fb.Add(fault.OnSave).Match(backend.Lock).Always().Fail(backend.ErrNoSpace)
	var idxErrs []bool
	for i := range 5 {
		err := fb.Save(t.Context(), h(backend.Index, i), nil)
		idxErrs = append(idxErrs, err != nil)
		if err != nil && !errors.Is(err, fault.ErrInjected) {
			t.Errorf("Fail(nil) error %v, want ErrInjected", err)
		}
		if err := fb.Save(t.Context(), h(backend.Lock, i), nil); !errors.Is(err, backend.ErrNoSpace) {
			t.Errorf("Always: save %d: %v", i, err)
		}
	}
	if want := []bool{false, true, true, false, false}; fmt.Sprint(idxErrs) != fmt.Sprint(want) {
		t.Errorf("Nth(2).Times(2) failed saves %v, want %v", idxErrs, want)
	}
	fb.VerifyAllFired(t)
}

func TestMatchFiltersType(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	fb.Add(fault.OnLoad).Match(backend.Pack).Always().Fail(nil)
	for _, ft := range []backend.FileType{backend.Index, backend.Pack} {
		if err := fb.Save(t.Context(), h(ft, 1), []byte("data")); err != nil {
			t.Fatal(err)
		}
		_, err := fb.Load(t.Context(), h(ft, 1), 0, 0)
		if (ft == backend.Pack) != (err != nil) {
			t.Errorf("Load %s: %v", ft, err)
		}
	}
}

func TestNameFilter(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	target := h(backend.Pack, 2)
	fb.Add(fault.OnRemove).Name(target.Name).Fail(nil)
	for i := range 3 {
		fb.Save(t.Context(), h(backend.Pack, i), nil)
	}
	for i := range 3 {
		err := fb.Remove(t.Context(), h(backend.Pack, i))
		if (i == 2) != (err != nil) {
			t.Errorf("Remove %d: %v", i, err)
		}
	}
	if _, err := fb.Stat(t.Context(), target); err != nil {
		t.Errorf("failed Remove removed the file: %v", err)
	}
	fb.VerifyAllFired(t)
}

func TestFailStatAndList(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	fb.Add(fault.OnStat).Fail(nil)
	fb.Add(fault.OnList).Match(backend.Snapshot).Fail(nil)
	fb.Save(t.Context(), h(backend.Snapshot, 1), nil)
	if _, err := fb.Stat(t.Context(), h(backend.Snapshot, 1)); !errors.Is(err, fault.ErrInjected) {
		t.Errorf("Stat: %v", err)
	}
	calls := 0
	err := fb.List(t.Context(), backend.Snapshot, func(backend.FileInfo) error { calls++; return nil })
	if !errors.Is(err, fault.ErrInjected) || calls != 0 {
		t.Errorf("List: %v after %d calls", err, calls)
	}
	if err := fb.List(t.Context(), backend.Snapshot, func(backend.FileInfo) error { calls++; return nil }); err != nil || calls != 1 {
		t.Errorf("second List: %v, %d calls", err, calls)
	}
	fb.VerifyAllFired(t)
}

func TestTruncate(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	data := []byte("0123456789abcdefghij")
	fb.Add(fault.OnLoad).Match(backend.Pack).Truncate(10)
	fb.Add(fault.OnSave).Match(backend.Index).Truncate(4)
	p, i := h(backend.Pack, 1), h(backend.Index, 1)
	for _, x := range []backend.Handle{p, i} {
		if err := fb.Save(t.Context(), x, data); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := fb.Load(t.Context(), p, 0, 0); err != nil || string(got) != "0123456789" {
		t.Errorf("truncated Load: %q, %v", got, err)
	}
	if got, _ := fb.Load(t.Context(), p, 0, 0); !bytes.Equal(got, data) {
		t.Errorf("Load after the fault fired: %q", got)
	}
	if got, _ := fb.Unwrap().Load(t.Context(), i, 0, 0); string(got) != "0123" {
		t.Errorf("stored after truncated Save: %q", got)
	}
	if string(data) != "0123456789abcdefghij" {
		t.Errorf("Save fault changed the caller's slice: %q", data)
	}
	fb.VerifyAllFired(t)
}

func TestFlipBit(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	data := bytes.Repeat([]byte{0}, 8)
	fb.Add(fault.OnLoad).FlipBit(13)
	fb.Add(fault.OnSave).Match(backend.Key).FlipBit(0)
	p, k := h(backend.Pack, 1), h(backend.Key, 1)
	fb.Save(t.Context(), p, data)
	fb.Save(t.Context(), k, data)
	got, err := fb.Load(t.Context(), p, 0, 0)
	if err != nil || !bytes.Equal(got, []byte{0, 1 << 5, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("Load with bit 13 flipped: %v, %v", got, err)
	}
	if got, _ := fb.Unwrap().Load(t.Context(), k, 0, 0); got[0] != 1 {
		t.Errorf("stored after FlipBit(0) Save: %v", got)
	}
	if !bytes.Equal(data, make([]byte, 8)) {
		t.Errorf("Save fault changed the caller's slice: %v", data)
	}
	fb.VerifyAllFired(t)
}

// TestOutOfRangeNotCounted: a mutation that cannot change the data does
// not count, so VerifyAllFired reports it.
func TestOutOfRangeNotCounted(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	fb.Add(fault.OnLoad).FlipBit(64)
	fb.Add(fault.OnLoad).Truncate(8)
	fb.Save(t.Context(), h(backend.Pack, 1), make([]byte, 8))
	if got, _ := fb.Load(t.Context(), h(backend.Pack, 1), 0, 0); !bytes.Equal(got, make([]byte, 8)) {
		t.Errorf("Load changed by out-of-range faults: %v", got)
	}
	u := fb.Unfired()
	if len(u) != 2 || !strings.Contains(u[0], "flipbit(64)") || !strings.Contains(u[1], "truncate(8)") {
		t.Errorf("Unfired = %q", u)
	}
	rec := &recorder{TB: t}
	fb.VerifyAllFired(rec)
	if !rec.failed {
		t.Error("VerifyAllFired did not report unfired faults")
	}
}

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }

// TestConcurrentNth: under concurrency exactly one call is the 5th.
func TestConcurrentNth(t *testing.T) {
	fb := fault.Wrap(newInner(t))
	fb.Add(fault.OnLoad).Nth(5).Fail(nil)
	fb.Add(fault.OnSave).Match(backend.Lock).Nth(3).Times(4).Fail(nil)
	fb.Save(t.Context(), h(backend.Pack, 1), []byte("x"))
	var loadFails, saveFails atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if _, err := fb.Load(t.Context(), h(backend.Pack, 1), 0, 0); err != nil {
				loadFails.Add(1)
			}
			if err := fb.Save(t.Context(), h(backend.Lock, i), nil); err != nil {
				saveFails.Add(1)
			}
		})
	}
	wg.Wait()
	if loadFails.Load() != 1 || saveFails.Load() != 4 {
		t.Errorf("failed loads %d, saves %d; want 1 and 4", loadFails.Load(), saveFails.Load())
	}
	fb.VerifyAllFired(t)
}

func TestMutationOnWrongOpPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Truncate on OnStat did not panic")
		}
	}()
	fault.Wrap(newInner(t)).Add(fault.OnStat).Truncate(1)
}
