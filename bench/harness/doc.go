// Package harness runs the benchmark of cmd/lifeboat-bench: capture,
// re-capture, churn, restore and prune of a bench corpus for a lifeboat
// binary and its peers (restic, borg) as child processes, interleaved in
// rounds, with medians, ratios, the stage ceiling, the performance
// targets, text, JSON and an SVG chart (docs/performance.md).
//
// Invariant: every tool is measured the same way, from wait4's rusage of
// a child started by a small trampoline process (Trampoline), so the
// harness's own memory never shows up in a tool's peak RSS. The lifeboat
// binary links none of this package.
package harness
