package memsample

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// MaxRSS is the peak resident set of a rusage in bytes (Linux counts
// ru_maxrss in KiB).
func MaxRSS(ru *syscall.Rusage) int64 { return ru.Maxrss << 10 }

// SelfMaxRSS is this process's peak resident set so far, in bytes.
func SelfMaxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return MaxRSS(&ru)
}

// Status returns the sizes of /proc/self/status (VmRSS, VmHWM, RssAnon,
// RssFile, ...) in bytes; it is empty where that file cannot be read.
func Status() map[string]int64 {
	m := map[string]int64{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 2 && string(f[1]) == "kB" {
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err == nil {
				m[string(k)] = n << 10
			}
		}
	}
	return m
}

// Peak is the highest of each size seen in one phase, in bytes.
type Peak struct {
	Phase string
	Anon  int64 // RssAnon: the heap and other private memory
	File  int64 // RssFile: mapped files (an mmapped bbolt index)
	RSS   int64 // VmRSS
}

// Sampler reads Status every interval and keeps each phase's peaks. It
// also samples when a phase starts and ends, so a phase shorter than the
// interval still has its peaks.
type Sampler struct {
	mu    sync.Mutex
	cur   int // index into peaks; -1 between phases
	peaks []Peak
	done  chan struct{}
	wg    sync.WaitGroup
}

// Start starts a Sampler; Stop ends it.
func Start(interval time.Duration) *Sampler {
	s := &Sampler{cur: -1, done: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sample()
			}
		}
	})
	return s
}

func (s *Sampler) sample() {
	st := Status()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur < 0 {
		return
	}
	p := &s.peaks[s.cur]
	p.Anon = max(p.Anon, st["RssAnon"])
	p.File = max(p.File, st["RssFile"])
	p.RSS = max(p.RSS, st["VmRSS"])
}

// Phase starts the phase name; samples go to it until EndPhase or the
// next Phase.
func (s *Sampler) Phase(name string) {
	s.mu.Lock()
	s.peaks = append(s.peaks, Peak{Phase: name})
	s.cur = len(s.peaks) - 1
	s.mu.Unlock()
	s.sample()
}

// EndPhase samples once more and ends the current phase.
func (s *Sampler) EndPhase() {
	s.sample()
	s.mu.Lock()
	s.cur = -1
	s.mu.Unlock()
}

// Stop ends the sampling and returns the peaks of every phase, in the
// order they started.
func (s *Sampler) Stop() []Peak {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Peak(nil), s.peaks...)
}
