package keylock

import (
	"testing"
)

// Lock excludes the same key and not another; IfUnlocked skips a held key
// and runs on a free one.
func TestMapLocksPerKey(t *testing.T) {
	var l Map[string]
	unlock := l.Lock("a")
	ran := false
	l.IfUnlocked("a", func() { ran = true })
	if ran {
		t.Fatal("IfUnlocked ran on a held key")
	}
	l.Lock("b")() // another key is free
	got, done := make(chan struct{}), make(chan struct{})
	go func() {
		u := l.Lock("a")
		close(got)
		u()
		close(done)
	}()
	select {
	case <-got:
		t.Fatal("a second Lock of a held key went through")
	default:
	}
	unlock()
	<-got // the waiter takes it once released
	<-done
	l.IfUnlocked("a", func() { ran = true })
	if !ran {
		t.Fatal("IfUnlocked did not run on a free key")
	}
}
