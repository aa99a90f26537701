package recovery

import "sync"

// keyLocks is one mutex per key, made on first use: callers working on
// the same key (a workspace, an idempotency key) take turns.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

// lock takes key's mutex and returns its unlock.
func (k *keyLocks) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*sync.Mutex{}
	}
	m, ok := k.m[key]
	if !ok {
		m = new(sync.Mutex)
		k.m[key] = m
	}
	k.mu.Unlock()
	m.Lock()
	return m.Unlock
}
