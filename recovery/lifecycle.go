package recovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"lifeboat/internal/keylock"
	"lifeboat/providers"
	"lifeboat/recovery/dirwatch"
	"lifeboat/repo"
)

// Capturer takes the portable checkpoint: it saves dir as a snapshot of
// the workspace and verifies it (RepoCapturer is the real one).
//
// Contract: it returns a Result only for a snapshot that is written and
// verified; Complete is false when some paths could not be read.
type Capturer interface {
	Capture(ctx context.Context, req CaptureRequest) (Result, error)
}

// CaptureRequest is one portable capture.
type CaptureRequest struct {
	Workspace Workspace
	Dir       string // the workspace's files, readable locally
	Reason    Reason
	Time      time.Time // the lifecycle clock's time at the start
}

// Result is a written and verified snapshot.
type Result struct {
	Snapshot string // id, hex
	Complete bool
	Problems int // paths that could not be read (partial)
	Files    uint64
	Bytes    uint64
	NewBytes uint64
	// Prefixes names the files captured as a verified prefix of a file
	// that kept growing while it was read (the snapshot is complete).
	Prefixes []string
}

// Retention applies the stored retention policy of a workspace; it runs
// after every successful capture (RepoRetention is the real one). It must
// never remove lastGood, the snapshot id just promoted.
type Retention interface {
	Apply(ctx context.Context, ws, lastGood string) error
}

// Config sets up a Lifecycle. Store, Capturer and Providers are required.
type Config struct {
	Store     *Store
	Capturer  Capturer
	Providers []providers.Provider // looked up by Name()
	// Instances are named provider instances (the service's config: two
	// SSH hosts are two instances of one adapter); a workspace's Provider
	// names one. They take precedence over Providers of the same name.
	Instances map[string]providers.Provider
	// Overrides are per-workspace settings from the service's config; a
	// workspace's own Settings (set through the API) take precedence.
	Overrides map[string]Settings
	// Holds records in the repository which snapshots the lifecycle needs
	// kept (last good checkpoints, those recoveries name), so retention and
	// prune in any process keep them (RepoHolds is the real one); optional.
	Holds Holder
	// RepoLock, when set, runs every piece of repository work (retention,
	// a hold, a restore) under the repository lock it needs: `serve` runs
	// them under a shared lock its pieces share for a while
	// (repo.SharedLock), so an exclusive locker in any process gets its
	// turn between them. nil: the caller holds a lock for the lifecycle's
	// whole life (the CLI's one-shot commands).
	RepoLock func(ctx context.Context, fn func() error) error
	Clock    Clock // default SystemClock
	// ParkInterval is the minimum time between park captures of one
	// workspace, measured from its last good checkpoint; default 5 min.
	ParkInterval time.Duration
	// NativeInterval is the minimum time between native checkpoints of one
	// workspace; default ParkInterval. Independent of ParkInterval.
	NativeInterval time.Duration
	// PeriodicInterval is how often Run looks at running workspaces;
	// default 15 min.
	PeriodicInterval time.Duration
	// PeriodicOff says Run is not used: Intervals reports no periodic
	// interval (0) for any workspace.
	PeriodicOff bool
	// MaxParallel bounds captures of different workspaces at once; default 2.
	MaxParallel int
	// MaxChecks bounds the workspaces checked at once by periodic rounds
	// (instance inspected, files mirrored and fingerprinted) and the
	// recovery service's scheduled health checks together; default 8.
	MaxChecks int
	// QuiesceTimeout bounds pausing the writers and waiting for a browser
	// to stop; default 30 s. QuiescePoll is how often a running browser is
	// checked again; default 1 s. ResumeTimeout bounds resuming; default 30 s.
	QuiesceTimeout, QuiescePoll, ResumeTimeout time.Duration
	Retention                                  Retention // optional
	Redact                                     Redactor  // applied to process records, and to the errors of receipts, recovery records and the lines it logs; optional
	// TailBytes bounds each process record's output tail; default 8 KiB.
	TailBytes int
	// OnReceipt, when set, is called with the receipt of every finished
	// capture, throttled park and periodic decision.
	OnReceipt func(Receipt)
	Logger    *slog.Logger
	// WatchFiles keeps inotify watches on the files of the workspaces the
	// lifecycle fingerprints (`serve`): a periodic round then finds a
	// workspace unchanged without a walk when no event came since the last
	// one, which is at most an hour old (fingerprintRewalk). Where
	// watching fails, rounds walk.
	WatchFiles bool
}

// Lifecycle drives checkpoints of the workspaces in its Store. Its methods
// are safe for concurrent use.
type Lifecycle struct {
	cfg   Config
	store *Store
	clock Clock
	log   *slog.Logger
	provs map[string]providers.Provider
	sem   chan struct{}
	check chan struct{} // slots of the scheduled checks (MaxChecks)
	procs processes

	base   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	flight map[string]*flight       // the capture in flight per workspace
	locks  map[string]chan struct{} // per-workspace lease: captures and restarts
	writer map[string][]Writer      // by workspace; "" applies to every workspace
	holds  keylock.Map[string]      // per workspace: its hold is written by one at a time
	kick   chan struct{}            // wakes Run when intervals changed
	hooks  testHooks
	fps    fingerprints
}

// testHooks let tests see where concurrent requests are.
type testHooks struct {
	joined   func(ws string, waiters int) // a caller joined a flight
	semWait  func(ws string)              // a flight waits for a parallel slot
	holdWait func(ws string)              // a hold write takes the shared hold lock
}

// New returns a Lifecycle over cfg.Store; make one per Store. Captures
// that a dead process left in flight are recorded as interrupted
// (interruptStale).
func New(cfg Config) (*Lifecycle, error) {
	if cfg.Store == nil || cfg.Capturer == nil {
		return nil, errors.New("recovery: a Store and a Capturer are required")
	}
	setDefault(&cfg.ParkInterval, 5*time.Minute)
	setDefault(&cfg.NativeInterval, cfg.ParkInterval)
	setDefault(&cfg.PeriodicInterval, 15*time.Minute)
	setDefault(&cfg.QuiesceTimeout, 30*time.Second)
	setDefault(&cfg.QuiescePoll, time.Second)
	setDefault(&cfg.ResumeTimeout, 30*time.Second)
	if cfg.MaxParallel <= 0 {
		cfg.MaxParallel = 2
	}
	if cfg.MaxChecks <= 0 {
		cfg.MaxChecks = 8
	}
	if cfg.TailBytes <= 0 {
		cfg.TailBytes = 8 << 10
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Lifecycle{cfg: cfg, store: cfg.Store, clock: cfg.Clock, log: cfg.Logger,
		provs: map[string]providers.Provider{}, sem: make(chan struct{}, cfg.MaxParallel), check: make(chan struct{}, cfg.MaxChecks),
		flight: map[string]*flight{}, locks: map[string]chan struct{}{}, writer: map[string][]Writer{},
		kick: make(chan struct{}, 1), fps: fingerprints{log: cfg.Logger, by: map[string]*watchedFiles{}}}
	if cfg.WatchFiles {
		w, err := dirwatch.New()
		if err != nil {
			l.log.Warn("workspaces' files are walked at every round: they cannot be watched for changes", "err", err)
		}
		l.fps.watch = w
	}
	for _, p := range cfg.Providers {
		l.provs[p.Name()] = p
	}
	for name, p := range cfg.Instances {
		l.provs[name] = p
	}
	if rh, ok := cfg.Holds.(*RepoHolds); ok && rh.Owner == "" {
		rh.Owner = cfg.Store.ID() // the holds this store's lifecycle writes
	}
	// What the repository and the capture have to say while they go on
	// (a key file set aside, a file cache that failed) goes to the log.
	l.base, l.stop = context.WithCancel(repo.WithWarn(context.Background(), func(msg string) { l.log.Warn(msg) }))
	if err := l.interruptStale(l.base); err != nil {
		l.fps.close()
		return nil, err
	}
	return l, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Stop cancels every capture in flight, also one that requests joined
// with contexts of their own (an API request's outlives its client), and
// every capture asked for later: each ends cancelled. It does not wait
// for them; Close does. A server calls it as its shutdown begins, before
// it waits for the requests in progress (which wait for their captures).
func (l *Lifecycle) Stop() { l.stop() }

// Drain waits until no capture is in flight (those that start meanwhile
// included), or ctx is done: what a shutdown lets finish before Stop.
func (l *Lifecycle) Drain(ctx context.Context) error {
	for {
		l.mu.Lock()
		var running []chan struct{}
		for _, f := range l.flight {
			running = append(running, f.done)
		}
		l.mu.Unlock()
		if len(running) == 0 {
			return nil
		}
		for _, done := range running {
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// Close cancels what is in flight and waits for it (writers are resumed).
func (l *Lifecycle) Close() {
	l.stop()
	l.wg.Wait()
	l.fps.close()
}

// repoWork runs fn under the repository lock the process needs.
func (l *Lifecycle) repoWork(ctx context.Context, fn func() error) error {
	if l.cfg.RepoLock == nil {
		return fn()
	}
	return l.cfg.RepoLock(ctx, fn)
}

// Store returns the lifecycle's state store.
func (l *Lifecycle) Store() *Store { return l.store }

// RegisterWriter adds a writer to pause around captures of workspace ws
// ("" for every workspace). Writers are paused in registration order
// (every-workspace ones first) and resumed in reverse. An ExecWriter
// without its own Redact gets the lifecycle's (Config.Redact).
func (l *Lifecycle) RegisterWriter(ws string, w Writer) {
	if e, ok := w.(ExecWriter); ok && e.Redact == nil {
		e.Redact = l.cfg.Redact
		w = e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writer[ws] = append(l.writer[ws], w)
}

func (l *Lifecycle) writers(ws string) []Writer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(append([]Writer(nil), l.writer[""]...), l.writer[ws]...)
}

// StartProcess registers a command the server runs in workspace ws. Write
// its output to the returned Process and call Exit when it ends; its
// record is kept with every checkpoint taken while it runs, and with the
// first one after it exited.
func (l *Lifecycle) StartProcess(ws string, argv []string, dir string) (*Process, error) {
	w, err := l.store.Workspace(ws)
	if err != nil {
		return nil, err
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("register a process in %s: the command is empty", ws)
	}
	p := &Process{id: "proc-" + randomHex(6), gen: w.Generation, rec: ProcessRecord{Command: append([]string(nil), argv...), Dir: dir, Started: l.clock.Now()}, max: l.cfg.TailBytes}
	l.procs.add(ws, p)
	return p, nil
}

func (l *Lifecycle) provider(w Workspace) (providers.Provider, error) {
	p, ok := l.provs[w.Provider]
	if !ok {
		return nil, fmt.Errorf("%w: workspace %s names provider %q, which is not configured in this lifeboat (configured: %s)",
			ErrUnknownProvider, w.ID, w.Provider, l.providerNames())
	}
	return p, nil
}

func (l *Lifecycle) providerNames() string {
	names := l.ProviderNames()
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ProviderNames lists the configured provider instances, sorted.
func (l *Lifecycle) ProviderNames() []string {
	names := make([]string, 0, len(l.provs))
	for n := range l.provs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Provider returns the provider instance called name.
func (l *Lifecycle) Provider(name string) (providers.Provider, bool) {
	p, ok := l.provs[name]
	return p, ok
}

// Intervals returns the effective park and periodic intervals of
// workspace w: its own, else the config's for it, else the defaults; the
// periodic one is 0 when periodic captures are off (Config.PeriodicOff).
func (l *Lifecycle) Intervals(w Workspace) (park, periodic time.Duration) { return l.settings(w) }

func (l *Lifecycle) settings(w Workspace) (park, periodic time.Duration) {
	park, periodic = l.cfg.ParkInterval, l.cfg.PeriodicInterval
	if o, ok := l.cfg.Overrides[w.ID]; ok {
		park, periodic = cmp.Or(o.ParkInterval, park), cmp.Or(o.PeriodicInterval, periodic)
	}
	park, periodic = cmp.Or(w.Settings.ParkInterval, park), cmp.Or(w.Settings.PeriodicInterval, periodic)
	if l.cfg.PeriodicOff {
		periodic = 0
	}
	return park, periodic
}

// lease takes the per-workspace lease that captures and restarts share:
// in this process, and on a shared store among every server.
func (l *Lifecycle) lease(ctx context.Context, ws string) (release func(), err error) {
	local, err := l.localLease(ctx, ws)
	if err != nil {
		return nil, err
	}
	shared, _, err := l.sharedLease(ctx, ws)
	if err != nil {
		local()
		return nil, err
	}
	return func() { shared(); local() }, nil
}

// localLease is the lease among this process's captures and restarts.
func (l *Lifecycle) localLease(ctx context.Context, ws string) (release func(), err error) {
	ch := l.localLock(ws)
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sharedLease is the lease among the servers of a shared store: the
// workspace's lock in the database, held on a connection of its own and
// gone with a server that dies (always granted on an embedded store).
// lost closes if the lock goes with its session before release.
func (l *Lifecycle) sharedLease(ctx context.Context, ws string) (release func(), lost <-chan struct{}, err error) {
	unlock, lost, err := l.store.db.Lock(ctx, workspaceLockName(ws), true)
	if err != nil {
		return nil, nil, fmt.Errorf("workspace %s: taking its lock in the state store: %w", ws, err)
	}
	return unlock, lost, nil
}

// ErrLockLost: the workspace's lock in the state store went with its
// database session (a dropped connection, a restarted database) while a
// capture held it. The capture stops and is not promoted; another server
// may take the workspace.
var ErrLockLost = errors.New("the workspace's lock in the state store was lost with its database session; the capture stopped")

// stopOnLost returns ctx, cancelled with cause ErrLockLost when lost
// closes, and the function that stops watching lost.
func stopOnLost(ctx context.Context, ws string, lost <-chan struct{}) (context.Context, func()) {
	if lost == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-lost:
			cancel(fmt.Errorf("workspace %s: %w", ws, ErrLockLost))
		case <-done:
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// localLock is the channel of ws's lease in this process (a send takes it).
func (l *Lifecycle) localLock(ws string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.locks[ws]
	if !ok {
		ch = make(chan struct{}, 1)
		l.locks[ws] = ch
	}
	return ch
}

func workspaceLockName(ws string) string { return "workspace/" + ws }
