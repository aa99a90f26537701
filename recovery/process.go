package recovery

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ProcessRecord is a command the server ran in a workspace, as kept with a
// checkpoint: redacted, with a bounded tail of its output.
type ProcessRecord struct {
	Command   []string   `json:"command"`
	Dir       string     `json:"dir"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Tail      string     `json:"tail"`      // the last output, at most the configured tail size
	Truncated bool       `json:"truncated"` // earlier output was dropped
}

// Redactor rewrites a string to hide sensitive values (the caller's rules).
type Redactor func(string) string

// redacted replaces what a redaction pattern matched.
const redacted = "[REDACTED]"

// RedactPatterns returns a Redactor that replaces every match of each
// pattern with "[REDACTED]".
func RedactPatterns(patterns ...*regexp.Regexp) Redactor {
	return func(s string) string {
		for _, p := range patterns {
			s = p.ReplaceAllString(s, redacted)
		}
		return s
	}
}

// Process is a registered command; write its output to it as it streams
// (it is an io.Writer) and call Exit when it ends. Safe for concurrent use.
type Process struct {
	id        string
	gen       uint64 // the workspace generation (instance) it was registered on
	mu        sync.Mutex
	rec       ProcessRecord
	tail      []byte // ring: the newest max bytes
	max       int
	truncated bool
	exited    bool
}

// Write appends output; only the newest tail-size bytes are kept.
func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	if len(b) >= p.max {
		p.truncated = p.truncated || len(p.tail) > 0 || len(b) > p.max
		b = b[len(b)-p.max:]
		p.tail = append(p.tail[:0], b...)
		return n, nil
	}
	if over := len(p.tail) + len(b) - p.max; over > 0 {
		p.tail = append(p.tail[:0], p.tail[over:]...)
		p.truncated = true
	}
	p.tail = append(p.tail, b...)
	return n, nil
}

// ID names the process among the workspace's registered ones.
func (p *Process) ID() string { return p.id }

// Exit records the command's end.
func (p *Process) Exit(code int, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rec.Ended, p.rec.ExitCode, p.exited = &at, &code, true
}

// record returns the process as stored, redacted.
func (p *Process) record(redact Redactor) ProcessRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rec
	r.Command = append([]string(nil), r.Command...)
	tail := p.tail
	if p.truncated { // the cut may have split a character
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
	}
	r.Tail = strings.ToValidUTF8(string(tail), "\uFFFD")
	r.Truncated = p.truncated
	if redact != nil {
		for i := range r.Command {
			r.Command[i] = redact(r.Command[i])
		}
		r.Dir, r.Tail = redact(r.Dir), redact(r.Tail)
	}
	return r
}

// processes holds the registered commands of every workspace.
type processes struct {
	mu   sync.Mutex
	byWS map[string][]*Process
}

func (ps *processes) add(ws string, p *Process) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.byWS == nil {
		ps.byWS = map[string][]*Process{}
	}
	ps.byWS[ws] = append(ps.byWS[ws], p)
}

// current returns the registered processes of workspace w. A recovery
// ends the registrations of the instance it replaced: those processes
// are its lost ones (w.Lost), not running on the replacement, and are
// dropped here.
func (ps *processes) current(w Workspace) []*Process {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if w.Lost != nil && len(ps.byWS[w.ID]) > 0 {
		ps.byWS[w.ID] = slices.DeleteFunc(ps.byWS[w.ID], func(p *Process) bool { return p.gen < w.Lost.Generation })
	}
	return append([]*Process(nil), ps.byWS[w.ID]...)
}

// snapshot returns the records of w's processes and the processes that
// had exited when they were taken.
func (ps *processes) snapshot(w Workspace, redact Redactor) (recs []ProcessRecord, exited []*Process) {
	list := ps.current(w)
	recs = make([]ProcessRecord, 0, len(list))
	for _, p := range list {
		r := p.record(redact)
		recs = append(recs, r)
		if r.Ended != nil {
			exited = append(exited, p)
		}
	}
	return recs, exited
}

// drop forgets every process of ws (the workspace was removed).
func (ps *processes) drop(ws string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.byWS, ws)
}

// forget drops processes recorded as exited with a checkpoint. Running
// ones, and ones that exited after their record was taken, stay for the
// next checkpoint.
func (ps *processes) forget(ws string, exited []*Process) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(exited) == 0 {
		return
	}
	ps.byWS[ws] = slices.DeleteFunc(ps.byWS[ws], func(p *Process) bool { return slices.Contains(exited, p) })
}

// ErrUnknownProcess: no registered process with that id.
var ErrUnknownProcess = errors.New("unknown process")

// RegisteredProcess is a command registered with StartProcess, as the
// next checkpoint will record it (redacted).
type RegisteredProcess struct {
	ID string `json:"id"`
	ProcessRecord
	Running bool `json:"running"`
}

// Processes returns the processes registered in workspace ws that the
// next checkpoint will record: running ones, and exited ones until a
// checkpoint recorded them.
func (l *Lifecycle) Processes(ws string) ([]RegisteredProcess, error) {
	w, err := l.store.Workspace(ws)
	if err != nil {
		return nil, err
	}
	list := l.procs.current(w)
	out := make([]RegisteredProcess, 0, len(list))
	for _, p := range list {
		r := p.record(l.cfg.Redact)
		out = append(out, RegisteredProcess{ID: p.id, ProcessRecord: r, Running: r.Ended == nil})
	}
	return out, nil
}

// Process returns registered process id of workspace ws, to append its
// output or record its exit.
func (l *Lifecycle) Process(ws, id string) (*Process, error) {
	w, err := l.store.Workspace(ws)
	if err != nil {
		return nil, err
	}
	for _, p := range l.procs.current(w) {
		if p.id == id {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w %q in workspace %s (a process is forgotten once a checkpoint recorded its exit, when a recovery replaced the instance it ran on, and when the server restarts)", ErrUnknownProcess, id, ws)
}

// Record returns the process as the next checkpoint will record it.
func (l *Lifecycle) Record(p *Process) RegisteredProcess {
	r := p.record(l.cfg.Redact)
	return RegisteredProcess{ID: p.id, ProcessRecord: r, Running: r.Ended == nil}
}
