package fault

import (
	"errors"
	"fmt"
	"slices"

	"lifeboat/backend"
)

// ErrInjected is the error of Fail(nil) and of a fault with no action.
var ErrInjected = errors.New("injected fault")

// Op is the Backend method a fault applies to.
type Op int

// Operations a fault can hit.
const (
	OnSave Op = iota + 1
	OnLoad
	OnStat
	OnList
	OnRemove
)

func (o Op) String() string {
	switch o {
	case OnSave:
		return "OnSave"
	case OnLoad:
		return "OnLoad"
	case OnStat:
		return "OnStat"
	case OnList:
		return "OnList"
	case OnRemove:
		return "OnRemove"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

type kind int

const (
	fail kind = iota
	truncate
	flipBit
)

// Fault is one planned fault, configured by chained calls. By default it
// fires once, on the first matching call, failing it with ErrInjected.
type Fault struct {
	b     *Backend
	op    Op
	types []backend.FileType // empty: any
	name  string             // "": any
	nth   int                // first matching call (1-based) that fires
	times int                // how many times it fires; -1: always
	kind  kind
	err   error
	arg   int64 // Truncate length or FlipBit index
	seen  int   // matching calls so far
	fired int
}

// Match limits the fault to files of the given types.
func (f *Fault) Match(types ...backend.FileType) *Fault {
	return f.update(func() { f.types = append(f.types, types...) })
}

// Name limits the fault to the file with this name (never matches List).
func (f *Fault) Name(name string) *Fault {
	return f.update(func() { f.name = name })
}

// Nth makes the fault skip n-1 matching calls and fire on the nth.
func (f *Fault) Nth(n int) *Fault {
	if n < 1 {
		panic("fault: Nth wants n >= 1")
	}
	return f.update(func() { f.nth = n })
}

// Times makes the fault fire on n matching calls in a row.
func (f *Fault) Times(n int) *Fault {
	if n < 1 {
		panic("fault: Times wants n >= 1")
	}
	return f.update(func() { f.times = n })
}

// Always makes the fault fire on every matching call from the nth on.
func (f *Fault) Always() *Fault {
	return f.update(func() { f.times = -1 })
}

// Fail makes the call fail with err (ErrInjected if nil) without reaching
// the wrapped backend: a failed Save stores nothing.
func (f *Fault) Fail(err error) *Fault {
	if err == nil {
		err = ErrInjected
	}
	return f.set(fail, err, 0)
}

// Truncate keeps only the first n bytes of the data a Save stores or a
// Load returns. Calls with n or fewer bytes do not match.
func (f *Fault) Truncate(n int) *Fault {
	if n < 0 {
		panic("fault: Truncate wants n >= 0")
	}
	return f.set(truncate, nil, int64(n))
}

// FlipBit inverts bit number bit (byte bit/8, mask 1<<(bit%8)) of the
// data a Save stores or a Load returns, counted from the start of that
// data. Calls whose data is too short do not match.
func (f *Fault) FlipBit(bit int64) *Fault {
	if bit < 0 {
		panic("fault: FlipBit wants bit >= 0")
	}
	return f.set(flipBit, nil, bit)
}

func (f *Fault) set(k kind, err error, arg int64) *Fault {
	if k != fail && f.op != OnSave && f.op != OnLoad {
		panic("fault: Truncate and FlipBit apply to OnSave and OnLoad only")
	}
	return f.update(func() { f.kind, f.err, f.arg = k, err, arg })
}

// update runs fn with the backend's lock held and returns f.
func (f *Fault) update(fn func()) *Fault {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	fn()
	return f
}

// Fired reports how many calls the fault has hit.
func (f *Fault) Fired() int {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	return f.fired
}

func (f *Fault) String() string {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	return f.describe()
}

func (f *Fault) describe() string {
	s := f.op.String()
	if len(f.types) > 0 {
		s += fmt.Sprint(f.types)
	}
	if f.name != "" {
		s += " name=" + f.name
	}
	s += fmt.Sprintf(" nth=%d", f.nth)
	if f.times < 0 {
		s += " always"
	} else {
		s += fmt.Sprintf(" times=%d", f.times)
	}
	switch f.kind {
	case fail:
		s += fmt.Sprintf(" fail(%v)", f.err)
	case truncate:
		s += fmt.Sprintf(" truncate(%d)", f.arg)
	case flipBit:
		s += fmt.Sprintf(" flipbit(%d)", f.arg)
	}
	return s + fmt.Sprintf(": fired %d", f.fired)
}

// matches reports whether a call of op on h (data for mutations) counts.
// Caller holds f.b.mu.
func (f *Fault) matches(op Op, h backend.Handle, list bool, data []byte) bool {
	if f.op != op || (len(f.types) > 0 && !slices.Contains(f.types, h.Type)) {
		return false
	}
	if f.name != "" && (list || f.name != h.Name) {
		return false
	}
	switch f.kind {
	case truncate:
		return int64(len(data)) > f.arg
	case flipBit:
		return f.arg < int64(len(data))*8
	}
	return true
}

// unfired reports whether the fault fired fewer times than planned.
func (f *Fault) unfired() bool {
	if f.times < 0 {
		return f.fired == 0
	}
	return f.fired < f.times
}

// action is a fired fault's effect, copied out of the lock.
type action struct {
	kind kind
	err  error
	arg  int64
}

// apply returns data changed by a mutation; data itself is not modified.
func (a action) apply(data []byte) []byte {
	switch a.kind {
	case truncate:
		if int64(len(data)) > a.arg {
			return data[:a.arg:a.arg]
		}
	case flipBit:
		if a.arg < int64(len(data))*8 {
			data = slices.Clone(data)
			data[a.arg/8] ^= 1 << (a.arg % 8)
		}
	}
	return data
}
