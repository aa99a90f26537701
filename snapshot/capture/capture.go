package capture

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"

	"lifeboat/snapshot"
)

// Options tune Run.
type Options struct {
	Workspace      string // required
	Host, Instance string // free-form, recorded in the manifest
	Tags           []string
	// Excludes are path.Match glob patterns. A pattern without '/' matches
	// an entry's base name at any depth; a pattern with '/' matches the
	// entry's slash path relative to the root (a leading '/' anchors
	// nothing more and is dropped; a trailing '/' is dropped too). '*' and
	// '?' never match '/', and there is no '**'. An excluded directory is
	// skipped with everything under it.
	Excludes []string
	// Readers is the number of files read and chunked at once; default
	// 2*GOMAXPROCS. One suits a spinning disk, many a network filesystem.
	Readers  int
	Parent   *snapshot.Manifest // recorded as the manifest's parent
	Progress snapshot.Progress  // nil: NoProgress
	Now      func() time.Time   // the manifest's time; default time.Now
	// Cache, when set, lets files whose device, inode, size, mtime and
	// ctime are unchanged since the last capture of the workspace reuse
	// their chunk ids without being read: Repository.FileCache.
	Cache FileCache
	// Tier is the tier file contents and trees are saved in; zero means
	// workspace. The manifest itself is always sealed in the workspace tier.
	Tier blob.Tier
	// Filter, when set, is asked about every entry below the root by its
	// slash path relative to the root; false leaves the entry out, and a
	// directory with everything under it (filter.go). It is
	// called from several goroutines at once.
	Filter func(rel string) bool
	// Sensitive lists subtrees of the root captured into the sensitive
	// tier as the snapshot's sensitive part, and left out of its
	// workspace tree (sensitive.go). Needs a key with that tier.
	Sensitive []SensitiveSpec
	// Discover, when set, finds more such subtrees during the walk: it is
	// asked about every directory below the root as it is listed, and a
	// directory it detects is left out of the workspace tree, checked on
	// the walker's goroutine, then prepared and captured into the
	// sensitive tier after the walk (sensitive.go).
	Discover Discoverer

	hooks *captureHooks // tests only
}

// FileCache stores, per workspace key and record key (opaque bytes:
// a capture passes keyed digests, never names), sealed records of files'
// identities and chunk ids (cache.go). Records are hints: Run
// opens each with its key and checks that its chunks are indexed before
// reusing one. Implementations must be safe for concurrent use.
// repo.FileCache implements it beside the local index.
type FileCache interface {
	// FileCacheGen returns the index's removal generation, which moves on
	// whenever blobs leave the index.
	FileCacheGen() (uint64, error)
	// FileCacheGet calls fn with the record under key (nil when none);
	// fn must not keep it.
	FileCacheGet(ws string, key []byte, fn func(v []byte)) error
	// FileCacheIndexed sets Indexed for each file whose chunks are all
	// indexed data blobs of tier t adding up to its size.
	FileCacheIndexed(t blob.Tier, q []repo.FileChunks) error
	// FileCachePut stores many records at once (one transaction).
	FileCachePut(ws string, recs []repo.FileCacheRecord) error
	// FileCachePrune drops the workspace's records keep rejects.
	FileCachePrune(ws string, keep func(key []byte) bool) (int, error)
	// FileCacheCount returns the number of the workspace's records.
	FileCacheCount(ws string) (int, error)
}

// captureHooks let tests act at chosen points of a capture.
type captureHooks struct {
	beforeOpen func(path string)              // a reader is about to open a file
	beforeRead func(path string, attempt int) // a read of an open file is about to start
	afterRead  func(path string, attempt int) // a read finished, before the second fstat
	walked     func()                         // the walker is done listing
	saved      func()                         // the manifest is stored, before the session's second check
	listed     func(dir string)               // a directory was listed and its first part stat'ed (any goroutine)
	flushed    func()                         // Flush returned, the manifest is next
	bytesRead  *atomic.Int64                  // file content bytes read
	// settled treats every file as settled for the file cache, as if the
	// capture ran long after the test made its files (ctimes cannot be
	// set back); start, when set, is the capture's start for that check.
	settled bool
	start   time.Time
}

// maxCaptureErrors caps the errors listed in a manifest; the rest are
// counted in one last entry (every one still goes to Progress.Error).
const maxCaptureErrors = 1000

// Run saves the directory tree at root as a snapshot of o.Workspace and
// returns its manifest (ID set).
//
// File contents are saved as workspace-tier data blobs by o.Readers
// goroutines; each directory becomes one or more tree blobs, saved as soon
// as all its entries are (children before parents). After everything is
// saved, Run flushes the repository and only then saves the manifest,
// so a manifest never references data that is not durable.
//
// Symlinks are never followed (root itself may be a symlink to a
// directory). Sockets and devices are recorded without content. A file is
// stat'ed when listed and fstat'ed before and after it is read; if its
// size, mtime or ctime moved during the read it is read once more. If it
// moved again and it only grew (an appended log), a third read checks
// that the second read's bytes are still the file's first bytes: then
// the snapshot holds that prefix, listed in Manifest.Prefixes, and stays
// complete (capPrefix says exactly what is checked). Otherwise (it
// shrank, or bytes already read changed: rewritten in place) the second
// read is kept as it is and the file is listed in Manifest.Errors as
// "changed while being read". A file that grows while it is read is read
// up to the size it had when the read passed its size before the read,
// so a fast writer cannot make a read endless. A file or directory
// that cannot be read (vanished, permission denied, ...) is left out of
// the snapshot, listed in Manifest.Errors and reported to Progress.Error;
// the capture goes on and the manifest is saved with Complete=false.
//
// Run returns an error, and saves no manifest, only when root cannot
// be read, the repository fails, ctx is cancelled, or a sensitive
// subtree is refused (o.Discover's Check or a Prepare: a running browser,
// say).
//
// With o.Cache, a file whose device, inode, size, mtime and ctime match
// its cache entry, and whose chunks are all still in the repository
// index, is not read. Cache entries are written only after the manifest is
// saved, in batches, and only for files read without change whose mtime
// and ctime are older than the start of the capture (by the real clock,
// not o.Now) by 100 ms on a local filesystem with nanosecond timestamps,
// else by 2 s: a younger file could still change within the filesystem's
// timestamp granularity without its mtime moving. Entries of files the
// capture did not keep are dropped.
//
// Directories are walked by file descriptor (openat), never by full path,
// so neither depth nor path length is limited, and at most a few hundred
// descriptors are open at once whatever the depth.
func Run(ctx context.Context, r *repo.Repository, root string, o Options) (*snapshot.Manifest, error) {
	if o.Workspace == "" {
		return nil, errors.New("capture: no workspace id given")
	}
	// Before anything is looked up: what a prune condemned before this
	// moment is never reused, and the snapshot is refused if the session
	// outlives its limit (repo.Session.Commit).
	session, err := r.BeginSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	var t treeRole
	if len(o.Sensitive) > 0 || o.Discover != nil {
		if t, err = workspaceRole(r, root, o.Sensitive); err != nil {
			return nil, err
		}
	}
	c, err := newCapturer(ctx, r, root, o, t)
	if err != nil {
		return nil, err
	}
	defer c.cancel(nil)
	m, err := c.run()
	if err != nil {
		return nil, err
	}
	if t.holdsPart {
		m.Sensitive = c.partRef
		m.Complete = m.Complete && c.partComplete
	}
	save := func(ctx context.Context) error {
		if _, err := snapshot.SaveManifest(ctx, c.r, m); err != nil {
			return fmt.Errorf("capture: saving the snapshot manifest: %w", err)
		}
		if c.o.hooks.saved != nil {
			c.o.hooks.saved()
		}
		return nil
	}
	undo := func(ctx context.Context) error {
		return c.r.RemoveFile(ctx, backend.Handle{Type: backend.Snapshot, Name: m.ID.String()})
	}
	if err := session.Commit(c.ctx, save, undo); err != nil {
		return nil, err
	}
	c.updateCache()
	return m, nil
}

// treeRole is what sets one tree of a capture apart: the workspace tree,
// which may hold a sensitive part, or one of that part's trees.
type treeRole struct {
	holdsPart bool            // the workspace tree of a capture with sensitive subtrees (o.Sensitive or o.Discover)
	given     []SensitiveSpec // its given sensitive subtrees, checked
	omit      []string        // slash paths below its root left out, with their subtrees: the given ones
	inPart    bool            // a tree of the sensitive part: no manifest of its own, no prefixes
}

// newCapturer prepares the capture of the directory tree at root in role
// t, with o's options (defaults filled in). Its run walks the tree, reads
// its files, saves its trees and flushes the repository; the caller
// cancels its context when done with it.
func newCapturer(ctx context.Context, r *repo.Repository, root string, o Options, t treeRole) (*capturer, error) {
	excl, err := newCapExcludes(o.Excludes)
	if err != nil {
		return nil, err
	}
	if fc, ok := o.Cache.(*repo.FileCache); ok && fc == nil {
		o.Cache = nil // r.FileCache() of a repository opened without its index
	}
	if o.Readers <= 0 {
		o.Readers = 2 * runtime.GOMAXPROCS(0)
	}
	if o.Progress == nil {
		o.Progress = snapshot.NoProgress{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.hooks == nil {
		o.hooks = &captureHooks{}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", root, err)
	}
	keys, err := r.TierKeys(o.tier())
	if err != nil {
		return nil, err
	}
	c := &capturer{r: r, o: o, t: t, rootPath: abs, excl: excl, keys: keys,
		jobs:  make(chan *capJob, 2*o.Readers),
		users: newCapNames(), links: map[capInode]*capLink{}, onStack: map[capInode]bool{},
		partComplete: true,
	}
	// Files changed this recently are read but not cached (settled).
	now := time.Now()
	if !o.hooks.start.IsZero() {
		now = o.hooks.start
	}
	c.racyNs, c.racyFineNs = now.Add(-capRacyWindow).UnixNano(), now.Add(-capFineRacyWindow).UnixNano()
	if o.hooks.settled {
		c.racyNs, c.racyFineNs = math.MaxInt64, math.MaxInt64
	}
	if o.Cache != nil {
		c.wsKey, c.rootKey = capCacheKeys(keys, o.Workspace)
		// Read before any chunk is looked up or saved: the entries this
		// capture writes are stamped with it.
		if c.cacheGen, err = o.Cache.FileCacheGen(); err != nil {
			repo.Warnf(ctx, "capture: the file cache failed; every file is read: %v", err)
			c.o.Cache = nil
		}
	}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	return c, nil
}

// Files changed less than this before the capture started are not put in
// the file cache (see capturer.settled): capFineRacyWindow on a local
// filesystem with nanosecond timestamps, capRacyWindow elsewhere.
const (
	capRacyWindow     = 2 * time.Second
	capFineRacyWindow = 100 * time.Millisecond
)

// capturer is the state of one capture (Run).
type capturer struct {
	r          *repo.Repository
	o          Options
	t          treeRole
	ctx        context.Context
	cancel     context.CancelCauseFunc
	rootPath   string
	excl       *capExcludes
	keys       *crypt.TierKeys
	jobs       chan *capJob
	users      *capNames
	racyNs     int64 // see settled
	racyFineNs int64

	// Walker-only state.
	links    map[capInode]*capLink // files with more than one name, by first name
	stack    []*capDir             // the directories being walked, root first
	onStack  map[capInode]bool     // their device and inode numbers
	heldFrom int                   // stack[heldFrom:] hold an open descriptor
	found    []SensitiveSpec       // subtrees Discover detected and Check let through

	wsKey    string  // file cache: workspace key
	rootKey  blob.ID // file cache: the root directory's key
	cacheGen uint64  // file cache: the index's removal generation at the start

	files, dirs, bytes, newBytes atomic.Uint64

	errMu  sync.Mutex
	errs   []snapshot.CaptureError
	nErrs  int
	failed error // the first fatal error
	prefs  []snapshot.CapturePrefix
	nPrefs uint64

	cacheMu    sync.Mutex
	cachePuts  capChunked[capPut] // records to write after the manifest
	cacheSeen  capChunked[capKey] // part keys of this capture, kept by the prune
	cacheOrder chan []int32       // cachePuts in key order (sortCache)

	rootDone chan struct{}
	ahead    capAheadQueue

	partRef      *blob.ID // the workspace tree's sensitive part, once saved (captureTrees)
	partComplete bool     // every tree of that part was captured without errors
}

// fail records a fatal error and stops the capture.
func (c *capturer) fail(err error) {
	c.errMu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	c.errMu.Unlock()
	c.cancel(err)
}

// fatal returns the first fatal error, or the context's.
func (c *capturer) fatal() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.failed != nil {
		return c.failed
	}
	return context.Cause(c.ctx)
}

// record lists a per-entry problem; the capture goes on.
func (c *capturer) record(p string, err error) {
	c.o.Progress.Error(p, err)
	c.errMu.Lock()
	defer c.errMu.Unlock()
	c.nErrs++
	if len(c.errs) < maxCaptureErrors {
		c.errs = append(c.errs, snapshot.CaptureError{Path: p, Error: err.Error()})
	}
}

// prefixOK reports whether a file that keeps growing may be kept as a
// verified prefix (capPrefix): in the workspace tree, not in a browser
// profile's sensitive tree, whose part has no such list.
func (c *capturer) prefixOK() bool {
	return !c.t.inPart
}

// prefix lists a file the snapshot holds a verified prefix of; the
// snapshot stays complete.
func (c *capturer) prefix(p string, size, fileSize uint64) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	c.nPrefs++
	if len(c.prefs) < maxCaptureErrors {
		c.prefs = append(c.prefs, snapshot.CapturePrefix{Path: p, Size: size, FileSize: fileSize})
	}
}

// listedPrefixes returns the prefixes to list, sorted by path, and the
// number of those left out.
func (c *capturer) listedPrefixes() ([]snapshot.CapturePrefix, uint64) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	slices.SortFunc(c.prefs, func(a, b snapshot.CapturePrefix) int { return strings.Compare(a.Path, b.Path) })
	return c.prefs, c.nPrefs - uint64(len(c.prefs))
}

// run captures c's tree: it walks it, reads its files, saves its trees
// (and, for a workspace tree that holds a sensitive part, that part's
// trees and the part), then flushes the repository. It returns the
// snapshot's manifest, not saved: Run saves the workspace tree's, a tree
// of the sensitive part has none.
func (c *capturer) run() (*snapshot.Manifest, error) {
	c.o.Progress.Start(0, 0)
	fd, err := capOpenat(unix.AT_FDCWD, c.rootPath, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", c.rootPath, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("capture %s: %w", c.rootPath, err)
	}
	m := &snapshot.Manifest{Workspace: c.o.Workspace, Time: c.o.Now().UTC(), Host: c.o.Host, Instance: c.o.Instance,
		Paths: []string{c.rootPath}, Tags: c.o.Tags}
	if c.o.Parent != nil {
		id := c.o.Parent.ID
		m.Parent = &id
	}
	m.Root.Type = snapshot.TypeDir
	if base := filepath.Base(c.rootPath); base != "/" && base != "." {
		m.Root.Name = []byte(base)
	}
	c.setMeta(&m.Root, &st)
	root := &capDir{node: &m.Root, dev: st.Dev, ino: st.Ino, h: newCapHandle(fd), key: c.rootKey, fineTimes: capFineTimes(fd)}
	if m.Root.Xattrs, err = capXattrsFd(fd); err != nil {
		c.record(".", err)
	}
	c.rootDone = make(chan struct{})

	if _, err := c.r.TierKeys(c.o.tier()); err != nil { // before any file is read
		root.h.release()
		close(c.jobs)
		return nil, err
	}
	var wg sync.WaitGroup
	for range c.o.Readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.reader()
		}()
	}
	c.stack = []*capDir{root}
	c.onStack[capInode{root.dev, root.ino}] = true
	c.startAhead()
	werr := c.walk(root, c.list(root, 0))
	c.stopAhead()
	if c.o.hooks.walked != nil {
		c.o.hooks.walked()
	}
	if root.h != nil {
		root.h.release()
		root.h = nil
	}
	close(c.jobs)
	wg.Wait()
	if c.o.Cache != nil {
		c.cacheOrder = make(chan []int32, 1)
		go c.sortCache()
	}
	if werr != nil {
		c.fail(werr)
	}
	if err := c.fatal(); err != nil {
		return nil, err
	}
	select {
	case <-c.rootDone:
	default:
		return nil, errors.New("capture: internal error: the root directory was not finished")
	}
	c.dirs.Add(1)
	if c.t.holdsPart {
		if err := c.captureTrees(); err != nil {
			return nil, err
		}
	}
	if err := c.r.Flush(c.ctx); err != nil {
		return nil, fmt.Errorf("capture: flushing the repository: %w", err)
	}
	if c.o.hooks.flushed != nil {
		c.o.hooks.flushed()
	}
	m.Totals = snapshot.Totals{Files: c.files.Load(), Dirs: c.dirs.Load(), Bytes: c.bytes.Load(), NewBytes: c.newBytes.Load()}
	c.errMu.Lock()
	m.Errors = c.errs
	if c.nErrs > len(c.errs) {
		m.Errors = append(m.Errors, snapshot.CaptureError{Error: fmt.Sprintf("%d more errors not listed", c.nErrs-len(c.errs))})
	}
	m.Complete = c.nErrs == 0
	c.errMu.Unlock()
	m.Prefixes, m.PrefixesNotListed = c.listedPrefixes()
	return m, nil
}
