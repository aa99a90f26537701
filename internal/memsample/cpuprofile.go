package memsample

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile writes a CPU profile of the process to a file it
// creates at path, until the stop it returns is called (which flushes
// the profile and closes the file).
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
