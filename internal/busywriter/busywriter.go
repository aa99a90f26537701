// Package busywriter is test support: a goroutine that runs a step
// without pause until it is stopped (an agent appending to its log, a
// scribbler dirtying pooled buffers, a flusher racing savers), and waits
// on its steps, so a test can make a change happen during a read
// without sleeping.
package busywriter

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

// Writer runs step 0, 1, 2, ... without pause from its own goroutine.
type Writer struct {
	steps atomic.Int64  // steps done so far
	tick  chan struct{} // a token after a step (dropped when one waits already)
	stop  chan struct{}
	done  chan struct{}
}

// Start runs step until Halt (called at the test's cleanup too); a step
// that fails fails the test and stops the writer.
func Start(t testing.TB, step func(i int) error) *Writer {
	t.Helper()
	w := &Writer{tick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			if err := step(i); err != nil {
				t.Error(err)
				return
			}
			w.steps.Add(1)
			select {
			case w.tick <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(w.Halt)
	return w
}

// Append starts a Writer that appends numbered lines to the file at path.
func Append(t testing.TB, path string) *Writer {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return Start(t, func(i int) error {
		_, err := fmt.Fprintf(f, "step %06d: the agent did something\n", i)
		return err
	})
}

// Steps is the number of steps done so far.
func (w *Writer) Steps() int64 { return w.steps.Load() }

// WaitPast returns once more than n steps were done, or the writer
// stopped.
func (w *Writer) WaitPast(n int64) {
	for w.steps.Load() <= n {
		select {
		case <-w.tick:
		case <-w.done:
			return
		}
	}
}

// WaitStep returns once the writer did a step after the call began.
func (w *Writer) WaitStep() { w.WaitPast(w.steps.Load()) }

// Halt stops the writer and waits for it.
func (w *Writer) Halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}
