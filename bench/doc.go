// Package bench makes deterministic, seeded workspace-like corpora,
// changes them the way work does (ChurnFraction), compares directory
// trees, and runs `lifeboat bench`: capture, re-capture, churn, restore
// and prune for Lifeboat and its peers (restic, borg) as child processes,
// interleaved in rounds, with medians, ratios, text, JSON and an SVG chart.
//
// Invariants: the same seed and scale always give the same bytes, names
// and modes (and the same churn gives the same result); Compare reports
// every difference in content, type, mode, mtime and symlink target,
// never stopping at the first; every tool is measured the same way, from
// wait4's rusage of a child started by a small trampoline process, so the
// harness's own memory never shows up in a tool's peak RSS.
package bench
