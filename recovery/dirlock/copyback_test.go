//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package dirlock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/snapshot"
	"lifeboat/snapshot/restore"
)

func TestClassify(t *testing.T) {
	transient := errors.New("connection reset")
	for _, tc := range []struct {
		name  string
		err   error
		wrote bool
		want  FailureClass
	}{
		{"transient, nothing written", transient, false, BeforeWrite},
		{"provider unavailable", &providers.Error{Kind: providers.KindUnavailable, Err: transient}, false, BeforeWrite},
		{"rate limited", &providers.Error{Kind: providers.KindRateLimited}, false, BeforeWrite},
		{"transient after writing", transient, true, AfterWrite},
		{"marked ErrWriteStarted", fmt.Errorf("writing a/b: %w: %w", ErrWriteStarted, transient), false, AfterWrite},
		{"unsafe archive", fmt.Errorf("entry ../x: %w", ErrUnsafeArchive), false, UnsafeArchive},
		{"unsafe archive after writing", fmt.Errorf("entry ../x: %w", ErrUnsafeArchive), true, UnsafeArchive},
		{"unsafe snapshot entry", &restore.Error{Paths: []string{"x"}, Err: snapshot.ErrUnsafeEntry}, false, UnsafeArchive},
		{"EACCES", &fs.PathError{Op: "open", Path: "/t/a", Err: syscall.EACCES}, false, Permission},
		{"EPERM after writing", &fs.PathError{Op: "chown", Path: "/t/a", Err: syscall.EPERM}, true, Permission},
		{"os.ErrPermission", os.ErrPermission, false, Permission},
		{"provider unauthorized", &providers.Error{Kind: providers.KindUnauthorized}, false, Permission},
		{"provider permission", &providers.Error{Kind: providers.KindPermission, Err: errors.New("cannot read a/b")}, false, Permission},
		{"provider permission after writing", &providers.Error{Kind: providers.KindPermission}, true, Permission},
		{"provider permission wrapping EACCES", &providers.Error{Kind: providers.KindPermission, Err: syscall.EACCES}, true, Permission},
		{"socket in the source", &providers.Error{Kind: providers.KindUnsupported, Code: "socket", Err: errors.New("socket run/agent.sock: provider local cannot create sockets")}, false, Unsupported},
		{"unsupported after writing", fmt.Errorf("copy-back: %w", &providers.Error{Kind: providers.KindUnsupported}), true, Unsupported},
		{"unsupported and cancelled", &providers.Error{Kind: providers.KindUnsupported, Err: context.Canceled}, false, Unsupported},
		{"provider conflict", &providers.Error{Kind: providers.KindConflict}, false, BeforeWrite},
		{"provider conflict after writing", &providers.Error{Kind: providers.KindConflict}, true, AfterWrite},
		{"cancelled", context.Canceled, false, Cancelled},
		{"provider call cancelled", &providers.Error{Kind: providers.KindUnavailable, Err: context.Canceled}, false, Cancelled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false, Cancelled},
		{"cancelled after writing", context.Canceled, true, AfterWrite},
	} {
		if got := Classify(tc.err, tc.wrote); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRetryDecide(t *testing.T) {
	def, zero, five := DefaultRetryPolicy, RetryPolicy{}, RetryPolicy{Attempts: 5, Backoff: time.Second}
	for _, tc := range []struct {
		p     RetryPolicy
		n     int
		c     FailureClass
		retry bool
		pause time.Duration
	}{
		{def, 1, BeforeWrite, true, 250 * time.Millisecond},
		{def, 2, BeforeWrite, true, 500 * time.Millisecond},
		{def, 3, BeforeWrite, false, 0}, // 3 attempts in total
		{def, 4, BeforeWrite, false, 0},
		{def, 0, BeforeWrite, false, 0},
		{zero, 2, BeforeWrite, true, 500 * time.Millisecond}, // zero value = default
		{zero, 3, BeforeWrite, false, 0},
		{five, 4, BeforeWrite, true, 8 * time.Second},
		{five, 5, BeforeWrite, false, 0},
		{def, 1, AfterWrite, false, 0},
		{def, 1, UnsafeArchive, false, 0},
		{def, 1, Permission, false, 0},
		{def, 1, Unsupported, false, 0},
		{five, 2, Unsupported, false, 0},
		{def, 1, Cancelled, false, 0},
		{five, 1, AfterWrite, false, 0},
	} {
		retry, pause := tc.p.Decide(tc.n, tc.c)
		if retry != tc.retry || pause != tc.pause {
			t.Errorf("%+v attempt %d %s: retry %v pause %s, want %v %s", tc.p, tc.n, tc.c, retry, pause, tc.retry, tc.pause)
		}
	}
}

// step is what one scripted copy-back attempt does.
type step struct {
	write bool  // calls Attempt.Writing first
	err   error // nil: succeeds
}

func TestCopyBackRuns(t *testing.T) {
	transient := errors.New("connection reset")
	unsafe := fmt.Errorf("entry ../etc: %w", ErrUnsafeArchive)
	denied := &fs.PathError{Op: "mkdir", Path: "/t/a", Err: syscall.EACCES}
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		steps  []step
		class  FailureClass // "" = success
		pauses []time.Duration
	}{
		{"first try", []step{{}}, "", nil},
		{"third try", []step{{err: transient}, {err: transient}, {}}, "", []time.Duration{250 * ms, 500 * ms}},
		{"three failures before writing", []step{{err: transient}, {err: transient}, {err: transient}}, BeforeWrite, []time.Duration{250 * ms, 500 * ms}},
		{"failure after writing", []step{{write: true, err: transient}}, AfterWrite, nil},
		{"after writing on the second", []step{{err: transient}, {write: true, err: transient}}, AfterWrite, []time.Duration{250 * ms}},
		{"ErrWriteStarted", []step{{err: fmt.Errorf("%w: %w", ErrWriteStarted, transient)}}, AfterWrite, nil},
		{"unsafe archive", []step{{err: unsafe}}, UnsafeArchive, nil},
		{"unsafe on the second", []step{{err: transient}, {err: unsafe}}, UnsafeArchive, []time.Duration{250 * ms}},
		{"permission", []step{{err: denied}}, Permission, nil},
		{"provider permission on the second", []step{{err: transient}, {err: &providers.Error{Kind: providers.KindPermission}}}, Permission, []time.Duration{250 * ms}},
		{"unsupported entry", []step{{err: &providers.Error{Kind: providers.KindUnsupported}}}, Unsupported, nil},
		{"wrote, then succeeded", []step{{write: true}}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			calls := 0
			done := make(chan error, 1)
			go func() {
				done <- CopyBack(t.Context(), clk, DefaultRetryPolicy, func(ctx context.Context, a *Attempt) error {
					s := tc.steps[calls]
					calls++
					if a.N != calls {
						return fmt.Errorf("attempt numbered %d, want %d", a.N, calls)
					}
					if s.write {
						a.Writing()
					}
					return s.err
				})
			}()
			var pauses []time.Duration
			var err error
		loop:
			for {
				select {
				case d := <-clk.Waits():
					pauses = append(pauses, d)
					clk.Advance(d)
				case err = <-done:
					break loop
				}
			}
			if calls != len(tc.steps) || fmt.Sprint(pauses) != fmt.Sprint(tc.pauses) {
				t.Fatalf("%d calls, pauses %v; want %d, %v", calls, pauses, len(tc.steps), tc.pauses)
			}
			if tc.class == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *CopyBackError
			last := tc.steps[len(tc.steps)-1].err
			if !errors.As(err, &ce) || ce.Class != tc.class || ce.Attempts != len(tc.steps) ||
				!errors.Is(err, ErrCopyBackFailed) || !errors.Is(err, last) {
				t.Fatalf("got %v (%+v), want class %s after %d attempts wrapping %v", err, ce, tc.class, len(tc.steps), last)
			}
			t.Log(err)
		})
	}
}

// Cancelling during the pause ends the copy-back as Cancelled, keeping the
// attempt's own error.
func TestCopyBackCancelledInPause(t *testing.T) {
	clk := newFakeClock()
	ctx, cancel := context.WithCancel(t.Context())
	transient := errors.New("connection reset")
	done := make(chan error, 1)
	go func() {
		done <- CopyBack(ctx, clk, DefaultRetryPolicy, func(context.Context, *Attempt) error { return transient })
	}()
	<-clk.Waits()
	cancel()
	err := <-done
	var ce *CopyBackError
	if !errors.As(err, &ce) || ce.Class != Cancelled || ce.Attempts != 1 || !errors.Is(err, transient) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}
