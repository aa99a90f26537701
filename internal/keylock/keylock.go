// Package keylock is a mutex per key, made on first use, so that work on
// one key (a workspace, an instance, an idempotency key) takes turns
// within this process while work on other keys goes on. Entries are never
// removed: one small mutex per key seen.
//
// It imports nothing of the module, so any package may use it.
package keylock

import "sync"

// Map holds the mutex of each key; the zero value is ready.
type Map[K comparable] struct {
	mu sync.Mutex
	m  map[K]*sync.Mutex
}

// of returns key's mutex.
func (l *Map[K]) of(key K) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[K]*sync.Mutex{}
	}
	m, ok := l.m[key]
	if !ok {
		m = new(sync.Mutex)
		l.m[key] = m
	}
	return m
}

// Lock takes key's mutex and returns its unlock.
func (l *Map[K]) Lock(key K) func() {
	m := l.of(key)
	m.Lock()
	return m.Unlock
}

// TryLock takes key's mutex unless someone holds it; ok reports whether
// it did.
func (l *Map[K]) TryLock(key K) (unlock func(), ok bool) {
	m := l.of(key)
	if !m.TryLock() {
		return nil, false
	}
	return m.Unlock, true
}

// IfUnlocked runs fn holding key's mutex, unless someone holds it: then
// fn is not run.
func (l *Map[K]) IfUnlocked(key K, fn func()) {
	if unlock, ok := l.TryLock(key); ok {
		defer unlock()
		fn()
	}
}
