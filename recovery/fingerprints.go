package recovery

import (
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
	"lifeboat/recovery/dirwatch"
)

// fingerprintRewalk bounds how long a workspace's watches alone vouch for
// its files: a fingerprint older than this is walked again even when no
// event came, for the changes inotify does not report (package dirwatch
// lists them).
const fingerprintRewalk = time.Hour

// fingerprints gives a Lifecycle its workspaces' fingerprints. With a
// watcher (`serve`), each workspace's files are watched by the walks
// that fingerprint them, and a fingerprint asked for again is the last
// walk's while no event came since that walk began.
type fingerprints struct {
	watch  *dirwatch.Watcher // nil: every fingerprint is a walk
	log    *slog.Logger
	walked func(ws string) // test hook: a walk ran

	mu        sync.Mutex
	by        map[string]*watchedFiles // by workspace
	errLogged bool                     // the watcher's queue error was logged
}

// watchedFiles is one workspace's last fingerprint walk and its watches.
type watchedFiles struct {
	mu     sync.Mutex // one walk at a time
	dir    string
	tree   *dirwatch.Tree
	fp     []byte      // the last walk's, nil when its watches cannot vouch for it
	at     time.Time   // when that walk began
	root   unix.Stat_t // dir's lstat before that walk
	retry  time.Time   // after a walk that could not watch: until then, walks watch nothing
	logged bool        // why the watches cannot vouch was logged
}

// of returns the fingerprint of workspace ws's files in dir (salt keys
// it), now being the lifecycle clock's time, and whether the files were
// listed for it (else the watches vouched for the last listing).
func (f *fingerprints) of(ws, dir string, salt []byte, now time.Time) (fp []byte, listed bool, err error) {
	if f.watch == nil {
		f.ran(ws)
		fp, err = fingerprint(salt, dir, nil)
		return fp, true, err
	}
	f.logQueueError()
	e := f.files(ws, dir)
	e.mu.Lock()
	defer e.mu.Unlock()
	// No watch sees dir itself change (its own stat, taken by the walk
	// before any watch was in place) or replaced by another directory (a
	// parent renamed, a symlink on its path changed): its lstat, compared
	// with the one taken before the last walk, does.
	var root unix.Stat_t
	rootErr := osutil.IgnoringEINTR(func() error { return unix.Lstat(dir, &root) })
	if e.fp != nil && rootErr == nil && sameStat(&e.root, &root) && now.Sub(e.at) < fingerprintRewalk && !e.tree.Changed() {
		return e.fp, false, nil
	}
	e.fp = nil
	f.ran(ws)
	if now.Before(e.retry) {
		fp, err = fingerprint(salt, dir, nil)
		return fp, true, err
	}
	e.tree.Mark()
	fp, err = fingerprint(salt, dir, e.tree)
	werr := e.tree.Done()
	switch {
	case err != nil:
	case werr != nil:
		// Its watches are released; watching is tried again after as
		// long as the watches alone may vouch for files, not at every
		// round (a watch limit reached is not taken again and again).
		e.retry = now.Add(fingerprintRewalk)
		if !e.logged {
			e.logged = true
			f.log.Info("a workspace's files cannot be watched for changes: its rounds walk them, and watching is tried again hourly", "workspace", ws, "dir", dir, "err", werr)
		}
	case rootErr == nil:
		e.fp, e.at, e.root = fp, now, root
	}
	return fp, true, err
}

func (f *fingerprints) ran(ws string) {
	if f.walked != nil {
		f.walked(ws)
	}
}

// logQueueError logs, once, that the watcher stopped reading its queue:
// from then on every round walks.
func (f *fingerprints) logQueueError() {
	err := f.watch.Err()
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.errLogged {
		f.errLogged = true
		f.log.Warn("workspaces' files are walked at every round from now on: the inotify queue could not be read", "err", err)
	}
}

// files is ws's entry for dir; an entry for another directory (the
// workspace moved to another instance) is replaced.
func (f *fingerprints) files(ws, dir string) *watchedFiles {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.by[ws]
	if e != nil && e.dir == dir {
		return e
	}
	if e != nil {
		e.tree.Close()
	}
	e = &watchedFiles{dir: dir, tree: f.watch.Tree()}
	f.by[ws] = e
	return e
}

// keep forgets the workspaces not in wss (removed, by this server or
// another sharing its store) and removes their watches.
func (f *fingerprints) keep(wss []Workspace) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.by) == 0 {
		return
	}
	ids := make(map[string]bool, len(wss))
	for _, w := range wss {
		ids[w.ID] = true
	}
	for ws, e := range f.by {
		if !ids[ws] {
			e.tree.Close()
			delete(f.by, ws)
		}
	}
}

// drop forgets workspace ws (removed) and removes its watches.
func (f *fingerprints) drop(ws string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.by[ws]; e != nil {
		e.tree.Close()
		delete(f.by, ws)
	}
}

// close removes every watch.
func (f *fingerprints) close() {
	if f.watch != nil {
		_ = f.watch.Close()
	}
}
