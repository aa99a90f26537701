package dirlock

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"lifeboat/internal/osutil"
)

// processStart is when this process loaded the package: close to its start,
// and enough to tell a reused PID from the holder.
var processStart = time.Now()

// Owner is what the sidecar <hash>.owner says about a lock's holder. It is
// written after the lock is taken and removed just before it is released,
// and it is only ever shown to people: exclusion rests on the flock alone.
type Owner struct {
	PID          int       `json:"pid"`
	Host         string    `json:"host"`
	ProcessStart time.Time `json:"process_start"` // when the holder process started (approximately)
	Acquired     time.Time `json:"acquired"`      // when it took this lock (its clock)
	Target       string    `json:"target"`        // canonical target path
	Purpose      string    `json:"purpose,omitempty"`

	// Set when read, not stored:
	InProcess bool `json:"-"` // held by another goroutine of this process
	Stale     bool `json:"-"` // Host is this host and PID is not running: left by a dead holder
}

func (o Owner) String() string {
	s := fmt.Sprintf("PID %d on host %q", o.PID, o.Host)
	if o.InProcess {
		s = fmt.Sprintf("this process (PID %d)", o.PID)
	}
	if o.Purpose != "" {
		s += fmt.Sprintf(" for %q", o.Purpose)
	}
	if !o.Acquired.IsZero() {
		s += ", held since " + o.Acquired.UTC().Format(time.RFC3339)
	}
	if !o.ProcessStart.IsZero() && !o.InProcess {
		s += ", process started " + o.ProcessStart.UTC().Format(time.RFC3339)
	}
	return s
}

// writeOwner replaces the sidecar at path with o: a temp file renamed over
// it, so a reader sees the old or the new record, never half of one. Only
// the lock holder writes it, so one temp name suffices. Not fsynced: it is
// diagnostics, and after a crash a stale record is harmless.
func writeOwner(path string, o Owner) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadOwner reads the sidecar at path. ok is false when there is none or it
// cannot be parsed (a holder that has not written it yet, or none).
func ReadOwner(path string) (o Owner, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &o) != nil {
		return Owner{}, false
	}
	if host, _ := os.Hostname(); o.Host == host && !osutil.ProcessAlive(o.PID) {
		o.Stale = true
	}
	return o, true
}
