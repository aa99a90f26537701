package osutil

import "syscall"

// IgnoringEINTR runs fn again while it fails with EINTR (a signal
// interrupted the system call before it did anything).
func IgnoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != syscall.EINTR {
			return err
		}
	}
}

// IgnoringEINTR2 is IgnoringEINTR for a call that also returns a value
// (a count read or written, a descriptor opened).
func IgnoringEINTR2[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if err != syscall.EINTR {
			return v, err
		}
	}
}
