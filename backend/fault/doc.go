// Package fault wraps a backend.Backend and injects planned faults for
// tests: failed saves and loads, truncated or bit-flipped data on the way
// in or out.
//
//	fb := fault.Wrap(b)
//	fb.Add(fault.OnSave).Nth(3).Fail(backend.ErrNoSpace)
//	fb.Add(fault.OnLoad).Match(backend.Pack).Truncate(10)
//	...
//	fb.VerifyAllFired(t)
//
// Invariants: a failed Save never reaches the wrapped backend (nothing is
// stored); without faults the wrapper is transparent (it passes
// backendtest.Run); faults are counted under one lock, so "the Nth call"
// is well defined under concurrency. Truncate and FlipBit deliberately
// break the Backend contract, to test that callers detect corruption.
// TempFull makes the temp files of a backend that streams them fill up
// like a full disk.
package fault
