// Package bench makes deterministic, seeded workspace-like corpora and
// compares directory trees, for the demo, tests and throughput benchmarks.
//
// Invariants: the same seed and scale always give the same bytes, names
// and modes; Compare reports every difference in content, type, mode,
// mtime and symlink target, never stopping at the first.
package bench
