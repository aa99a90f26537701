package memsample

import (
	"os"
	"path/filepath"
	"testing"
)

// StartCPUProfile creates the file and stop leaves a profile in it; a
// path it cannot create is an error and starts nothing.
func TestStartCPUProfile(t *testing.T) {
	if _, err := StartCPUProfile(filepath.Join(t.TempDir(), "no-such-dir", "cpu.pprof")); err == nil {
		t.Fatal("StartCPUProfile in a missing directory succeeded")
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := StartCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		t.Fatal("the CPU profile is empty after stop")
	}
}
