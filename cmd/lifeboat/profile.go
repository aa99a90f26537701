package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// profiler writes the CPU and heap profiles and the execution trace asked
// for with --cpuprofile, --memprofile and --trace, so a reader can see
// which stage bounds a command and when its cores wait.
type profiler struct {
	cpuPath, memPath, tracePath string
	cpuFile, traceFile          *os.File
}

func (p *profiler) start() error {
	if p.tracePath != "" {
		f, err := os.Create(p.tracePath)
		if err != nil {
			return usageError{fmt.Sprintf("--trace: %v", err)}
		}
		p.traceFile = f
		if err := trace.Start(f); err != nil {
			return err
		}
	}
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
	if p.traceFile != nil {
		trace.Stop()
		if err := p.traceFile.Close(); err != nil {
			return err
		}
	}
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
