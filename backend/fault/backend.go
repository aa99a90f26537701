package fault

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"lifeboat/backend"
)

// Backend is a backend.Backend that injects the planned faults into calls
// to the wrapped one. Safe for concurrent use.
type Backend struct {
	inner  backend.Backend
	mu     sync.Mutex
	faults []*Fault
}

var _ backend.Backend = (*Backend)(nil)

// Wrap returns b with no faults planned.
func Wrap(b backend.Backend) *Backend { return &Backend{inner: b} }

// Unwrap returns the wrapped backend.
func (b *Backend) Unwrap() backend.Backend { return b.inner }

// Add plans a fault on op; configure it with the returned Fault's methods.
func (b *Backend) Add(op Op) *Fault {
	f := &Fault{b: b, op: op, nth: 1, times: 1, err: ErrInjected}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = append(b.faults, f)
	return f
}

// Unfired describes every fault that fired fewer times than planned
// (an Always fault: never).
func (b *Backend) Unfired() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s []string
	for _, f := range b.faults {
		if f.unfired() {
			s = append(s, f.describe())
		}
	}
	return s
}

// VerifyAllFired fails t for every fault that did not fire as planned.
func (b *Backend) VerifyAllFired(t testing.TB) {
	t.Helper()
	if u := b.Unfired(); len(u) > 0 {
		t.Errorf("fault: %d planned fault(s) did not fire:\n\t%s", len(u), strings.Join(u, "\n\t"))
	}
}

// fire counts a call against every matching fault (failures, or
// mutations when mutate) and returns the actions of those that fire.
func (b *Backend) fire(op Op, h backend.Handle, list, mutate bool, data []byte) []action {
	b.mu.Lock()
	defer b.mu.Unlock()
	var acts []action
	for _, f := range b.faults {
		if (f.kind != fail) != mutate || !f.matches(op, h, list, data) {
			continue
		}
		f.seen++
		if f.seen >= f.nth && (f.times < 0 || f.fired < f.times) {
			f.fired++
			acts = append(acts, action{f.kind, f.err, f.arg})
		}
	}
	return acts
}

// failure returns the error of the first failing fault that fires, if any.
func (b *Backend) failure(op Op, h backend.Handle, list bool) error {
	if acts := b.fire(op, h, list, false, nil); len(acts) > 0 {
		return fmt.Errorf("fault: %s %s: %w", op, h, acts[0].err)
	}
	return nil
}

// mutate applies every mutation that fires to data.
func (b *Backend) mutate(op Op, h backend.Handle, data []byte) []byte {
	for _, a := range b.fire(op, h, false, true, data) {
		data = a.apply(data)
	}
	return data
}

// Location returns the wrapped backend's location.
func (b *Backend) Location() string { return b.inner.Location() }

// Save fails, or stores possibly mutated data.
func (b *Backend) Save(ctx context.Context, h backend.Handle, data []byte) error {
	if err := b.failure(OnSave, h, false); err != nil {
		return err
	}
	return b.inner.Save(ctx, h, b.mutate(OnSave, h, data))
}

// Load fails, or returns possibly mutated data.
func (b *Backend) Load(ctx context.Context, h backend.Handle, offset int64, length int) ([]byte, error) {
	if err := b.failure(OnLoad, h, false); err != nil {
		return nil, err
	}
	data, err := b.inner.Load(ctx, h, offset, length)
	if err != nil {
		return data, err
	}
	return b.mutate(OnLoad, h, data), nil
}

// Stat fails or passes through.
func (b *Backend) Stat(ctx context.Context, h backend.Handle) (backend.FileInfo, error) {
	if err := b.failure(OnStat, h, false); err != nil {
		return backend.FileInfo{}, err
	}
	return b.inner.Stat(ctx, h)
}

// List fails before calling fn, or passes through.
func (b *Backend) List(ctx context.Context, t backend.FileType, fn func(backend.FileInfo) error) error {
	if err := b.failure(OnList, backend.Handle{Type: t}, true); err != nil {
		return err
	}
	return b.inner.List(ctx, t, fn)
}

// Remove fails (removing nothing) or passes through.
func (b *Backend) Remove(ctx context.Context, h backend.Handle) error {
	if err := b.failure(OnRemove, h, false); err != nil {
		return err
	}
	return b.inner.Remove(ctx, h)
}

// Close closes the wrapped backend.
func (b *Backend) Close() error { return b.inner.Close() }
