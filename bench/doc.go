// Package bench makes deterministic, seeded workspace-like corpora,
// changes them the way work does (Churn, ChurnFraction), and compares
// directory trees (Compare). The throughput harness that measures
// Lifeboat against its peers on these corpora is bench/harness, run by
// cmd/lifeboat-bench; the demo (package demo) and many tests use the
// corpus alone.
//
// Invariants: the same seed and scale always give the same bytes, names
// and modes (and the same churn gives the same result); Compare reports
// every difference in content, type, mode, mtime and symlink target,
// never stopping at the first.
package bench
