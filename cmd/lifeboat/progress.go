package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressReporter renders snapshot.Progress: a bar with files, bytes, rate
// and ETA on a terminal; "status" JSON lines (at most one a second) and
// "error" lines under --json; on a pipe only the errors, as warnings.
type progressReporter struct {
	out   *printer
	bar   *progressbar.ProgressBar
	files atomic.Uint64
	total atomic.Uint64 // files expected, 0 while unknown
	bytes atomic.Uint64
	mu    sync.Mutex // serialises output
	stop  chan struct{}
	done  chan struct{}
	start time.Time
}

type statusMessage struct {
	MessageType string  `json:"message_type"` // "status"
	Files       uint64  `json:"files_done"`
	TotalFiles  uint64  `json:"total_files,omitempty"`
	Bytes       uint64  `json:"bytes_done"`
	Seconds     float64 `json:"seconds_elapsed"`
}

type errorMessage struct {
	MessageType string `json:"message_type"` // "error"
	Path        string `json:"path"`
	Error       string `json:"error"`
}

// newProgress starts a reporter; call finish when the operation ends.
func newProgress(out *printer, verb string) *progressReporter {
	p := &progressReporter{out: out, stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	if f, ok := out.errw.(*os.File); ok && !out.json && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(f), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription(verb), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionSetPredictTime(true), progressbar.OptionUseIECUnits(true),
			progressbar.OptionClearOnFinish())
	}
	go p.tick()
	return p
}

func (p *progressReporter) tick() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.status()
		}
	}
}

func (p *progressReporter) status() {
	if !p.out.json {
		return
	}
	p.emit(statusMessage{"status", p.files.Load(), p.total.Load(), p.bytes.Load(), time.Since(p.start).Seconds()})
}

func (p *progressReporter) emit(v any) {
	b, _ := json.Marshal(v)
	p.mu.Lock()
	fmt.Fprintf(p.out.w, "%s\n", b)
	p.mu.Unlock()
}

// Start records the expected totals; zeros (unknown) keep an earlier
// estimate.
func (p *progressReporter) Start(files, bytes uint64) {
	if files == 0 && bytes == 0 {
		return
	}
	p.total.Store(files)
	if p.bar != nil && bytes > 0 {
		p.mu.Lock()
		p.bar.ChangeMax64(int64(bytes))
		p.mu.Unlock()
	}
}

func (p *progressReporter) Done(files, bytes uint64) {
	n := p.files.Add(files)
	p.bytes.Add(bytes)
	if p.bar != nil {
		p.mu.Lock()
		if t := p.total.Load(); t > 0 {
			p.bar.Describe(fmt.Sprintf("%d/%d files", n, t))
		} else {
			p.bar.Describe(fmt.Sprintf("%d files", n))
		}
		_ = p.bar.Add64(int64(bytes))
		p.mu.Unlock()
	}
}

func (p *progressReporter) Error(path string, err error) {
	if p.out.json {
		p.emit(errorMessage{"error", path, err.Error()})
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintf(p.out.errw, "warning: %s: %v\n", quoteName(path), err)
}

// finish stops the ticker and clears the bar.
func (p *progressReporter) finish() {
	close(p.stop)
	<-p.done
	if p.bar != nil {
		p.mu.Lock()
		_ = p.bar.Finish()
		p.mu.Unlock()
	}
}
