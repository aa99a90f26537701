// Package memsample measures a process's memory the one way every
// measuring tool of Lifeboat does (the bench harness and the rsscheck
// programs of index/ and prune/): peak RSS from getrusage or wait4's
// rusage (MaxRSS), the fields of /proc/self/status (Status), and a
// Sampler that records the peak RssAnon, RssFile and VmRSS of named
// phases; and it starts the CPU profile those tools' -cpuprofile flag
// asks for (StartCPUProfile). Linux only; it is test and benchmark
// tooling, not linked into the lifeboat binary.
//
// Invariant: every size it returns is in bytes.
package memsample
