// Package race tells tests whether the race detector is on (Enabled), for
// the few that measure what it distorts (allocations, memory).
package race
