//go:build race

package snapshot

const capRaceEnabled = true
