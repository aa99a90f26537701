package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"lifeboat/providers"
)

// Stop implements providers.Stopper. A directory has nothing running of
// its own, so stopping records that Lifeboat stopped it: a marker
// <root>/.lifeboat/stopped/<id> holding the time, made durable. Inspect
// then reports Stopped with that time; Destroy removes the marker (and a
// Create or Rollback that makes the directory anew clears a stale one).
// The files stay readable and writable (ReadFiles, WriteFiles, Exec work
// as before). Stopping a stopped instance keeps the first time; stopping
// one that does not exist is KindConflict.
func (p *Provider) Stop(ctx context.Context, id providers.InstanceID) error {
	const op = "stop"
	if err := checkID(op, id); err != nil {
		return err
	}
	defer p.locks.Lock(id)()
	r, err := p.openExisting(ctx, op, id)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.MkdirAll(stoppedDir, 0o700); err != nil {
		return wrap(op, id, err)
	}
	marker := filepath.Join(stoppedDir, string(id))
	f, err := r.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return wrap(op, id, err)
	}
	_, err = fmt.Fprintln(f, p.now().UTC().Format(time.RFC3339Nano))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(r, stoppedDir)
	}
	if err != nil {
		_ = r.Remove(marker)
		return wrap(op, id, err)
	}
	return nil
}

// liveStatus is Inspect's answer for an instance whose directory exists.
func (p *Provider) liveStatus(r *os.Root, op string, id providers.InstanceID, now time.Time) (providers.Status, error) {
	dir := filepath.Join(p.root, string(id))
	marker := filepath.Join(stoppedDir, string(id))
	b, err := r.ReadFile(marker)
	if errors.Is(err, fs.ErrNotExist) {
		return providers.Status{State: providers.Running, Instance: id, Detail: "directory " + dir, ObservedAt: now}, nil
	}
	if err != nil {
		return providers.Status{}, wrap(op, id, fmt.Errorf("stopped marker %s: %w", filepath.Join(p.root, marker), err))
	}
	when := "at an unknown time (unreadable marker)"
	if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); err == nil {
		when = "at " + t.Format(time.RFC3339)
	}
	return providers.Status{State: providers.Stopped, Instance: id, ObservedAt: now,
		Detail: fmt.Sprintf("stopped by Lifeboat %s (marker %s; Destroy removes it); directory %s", when, filepath.Join(p.root, marker), dir)}, nil
}

// clearStopped removes id's stopped marker; an absent one is fine.
func (p *Provider) clearStopped(r *os.Root, id providers.InstanceID) error {
	err := r.Remove(filepath.Join(stoppedDir, string(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
