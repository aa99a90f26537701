package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// profiler writes the CPU and heap profiles asked for with --cpuprofile
// and --memprofile, so a reader can see which stage bounds a command.
type profiler struct {
	cpuPath, memPath string
	cpuFile          *os.File
}

func (p *profiler) start() error {
	if p.cpuPath == "" {
		return nil
	}
	f, err := os.Create(p.cpuPath)
	if err != nil {
		return usageError{fmt.Sprintf("--cpuprofile: %v", err)}
	}
	p.cpuFile = f
	return pprof.StartCPUProfile(f)
}

func (p *profiler) stop() error {
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		if err := p.cpuFile.Close(); err != nil {
			return err
		}
	}
	if p.memPath == "" {
		return nil
	}
	f, err := os.Create(p.memPath)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
