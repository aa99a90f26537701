package snapshot

// AheadHeld is what a TreesAhead holds: trees loaded and not taken, their
// entries and bytes, trees being loaded, loads (queued, loading or
// loaded) not taken, and ids on its stack.
type AheadHeld struct{ Loaded, Nodes, Bytes, Flying, Loads, Stack int }

// QueueForTest queues the subdirectories of t, as a tree the walk took.
func (s *TreesAhead) QueueForTest(t *Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue(t, nil)
}

// WaitLoadersForTest waits until no loader runs: they stop at the bounds,
// or once nothing is queued.
func (s *TreesAhead) WaitLoadersForTest() { s.wg.Wait() }

// HeldForTest returns what s holds.
func (s *TreesAhead) HeldForTest() AheadHeld {
	s.mu.Lock()
	defer s.mu.Unlock()
	return AheadHeld{s.loaded, s.nodes, s.bytes, s.flying.trees, len(s.loads), len(s.stack)}
}
