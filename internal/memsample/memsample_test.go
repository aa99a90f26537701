package memsample

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// A phase that holds 64 MiB of touched memory until it ends has an
// RssAnon peak of at least that, and the process's high-water marks
// (VmHWM, getrusage's maxrss) show it too.
func TestSamplerPeaks(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	const size = 64 << 20
	s := Start(time.Hour) // only the samples of Phase and EndPhase
	s.Phase("big")
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i)
	}
	s.EndPhase()
	runtime.KeepAlive(b)
	s.Phase("small")
	s.EndPhase()
	peaks := s.Stop()
	if len(peaks) != 2 || peaks[0].Phase != "big" || peaks[1].Phase != "small" {
		t.Fatalf("phases %+v", peaks)
	}
	if p := peaks[0]; p.Anon < size || p.RSS < p.Anon {
		t.Fatalf("peak of the big phase %+v, want RssAnon at least %d and VmRSS at least RssAnon", p, size)
	}
	if hwm := Status()["VmHWM"]; hwm < size || SelfMaxRSS() < size {
		t.Fatalf("VmHWM %d, getrusage maxrss %d: want both at least %d", hwm, SelfMaxRSS(), size)
	}
}
