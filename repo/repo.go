package repo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/chunk"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/pack"
)

// Options tune an open repository. Zero values take defaults.
type Options struct {
	CacheDir  string           // local index cache root; default: the user's cache dir + "/lifeboat"
	KeyHint   string           // try key files whose id starts with this first (and only)
	KeyCache  crypt.KEKCache   // look for the password's key-encryption key here first, keep it here once derived; nil: none
	Packers   int              // open packs per tier and blob type that blobs are spread over at random; default 2
	Uploads   int              // pack uploads in flight as packs fill; default 2 (a Flush uploads the open packs all at once)
	PackSize  int              // overrides the config's target pack size (tests)
	Compress  pack.Compression // overrides the config's compression
	Now       func() time.Time // clock; default time.Now
	NoIndexDB bool             // skip the local index (key commands that do not touch blobs)
	// SessionLimit is how long a capture session may run (Session);
	// default DefaultSessionLimit. A pack uploaded longer ago than this
	// before its index object is written is not vouched for (flush.go).
	SessionLimit time.Duration
	// KeepObjects keeps the snapshot and pin objects loaded in memory
	// (objcache.go), for a long-lived process whose retention reads
	// them all at every capture (`serve`). An object damaged in storage
	// after this process loaded it is then not seen as damaged by it.
	KeepObjects bool
	// SessionShare lets a capture session begin on the refresh of one
	// that began at most this long before in this process, without
	// listing the condemnation objects and syncing the index again: its
	// start is then that refresh's start, so its limit is counted from
	// there (docs/guarantees.md, Concurrency). `serve` sets it, so that a
	// fleet's captures do not each list the repository. 0: every session
	// refreshes.
	SessionShare time.Duration
}

// InitOptions are the settings fixed at init.
type InitOptions struct {
	PackSize    int // default 16 MiB
	Compression pack.Compression
	Chunker     chunk.Params
	KDF         crypt.KDFParams // default argon2id 4 passes, 48 MiB (crypt.DefaultKDF*)
	KeyCache    crypt.KEKCache  // keeps the first key's key-encryption key; nil: none
}

// Compression chooses the zstd level of new blobs (pack.Compression).
type Compression = pack.Compression

// ParseCompression validates a compression setting from the command line
// or a config file.
func ParseCompression(s string) (Compression, error) { return pack.ParseCompression(s) }

// DefaultPackSize is the target pack size of new repositories.
const DefaultPackSize = 16 << 20

// Repository is an open repository.
type Repository struct {
	be    backend.Backend
	cfg   *Config
	keys  *crypt.MasterKeys
	keyID blob.ID
	pols  map[blob.Tier]chunk.Pol
	// chunkers holds, per tier whose polynomial the key unlocks, the
	// chunkers SaveStream cuts with (chunkers.go).
	chunkers map[blob.Tier]*sync.Pool
	idx      *index.DB
	opts     Options
	now      func() time.Time

	bg     context.Context // uploads run under it; cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	cond      *sync.Cond                  // signals on mu when busy or inflight shrink
	pending   map[pendingKey]*pendingBlob // saved this session, not yet in the local index
	unindexed map[blob.Tier][]index.PackInfo
	packers   map[packerKey]*packerSet
	busy      int             // SaveBlob calls packing a new blob, and Flush calls under way
	uploadSeq uint64          // number of the last pack handed off for upload (handOff)
	inflight  map[uint64]bool // uploads not yet finished, by number, from hand-off on
	// lostSeq counts the packs that could not be stored (lost.go); lost
	// keeps the last few; reported is the count the last Flush reported.
	lostSeq, reported uint64
	lost              []lostPack

	testBeforeUpload func()            // called by upload before it waits for a slot
	testFlushWaits   func()            // called, r.mu held, when waitUploads waits
	testApplyErr     func() error      // replaces the local index's answer to an application (indexMu held)
	testStreamSeal   func(inline bool) // called as SaveStream seals a chunk in the caller's goroutine as soon as it is cut (inline), or one it held beside the chunking
	closing          bool
	// damagedIndex lists index objects the last sync skipped as damaged.
	damagedIndex []blob.ID
	// objects keeps the snapshot and pin objects this process loaded.
	objects objectCache

	uploads chan struct{} // one slot per pack upload in flight
	seals   chan struct{} // one slot per blob being sealed: bounds the buffers in use
	streams atomic.Int64  // SaveStream calls under way (stream.go)
	indexMu sync.Mutex    // serialises index object writes and their application
	// unapplied are index objects saved but not yet applied to the local
	// index, because an application failed (their blobs are still
	// pending); indexMu held.
	unapplied []index.Named
	closeOnce sync.Once
	closeErr  error

	// gcMu serialises refreshes of the condemned packs (condemned.go);
	// condemned holds the condemnation objects seen, by id, each loaded
	// once.
	gcMu      sync.Mutex
	condemned map[blob.ID]condemnedObject
	// refreshed is when the last refresh a session may share began
	// (Options.SessionShare); zero when there is none. gcMu held.
	refreshed startTime
	// uploadStart is when the upload of each pack not yet indexed began
	// (flush.go: a slow index write is not vouched for).
	uploadStart map[blob.ID]startTime
}

// DefaultCacheDir is the cache root used when none is given.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "lifeboat")
	}
	return filepath.Join(os.TempDir(), "lifeboat-cache")
}

// InitResult names what Init created.
type InitResult struct {
	ID    blob.ID // the repository's id
	KeyID blob.ID // its first key, which unlocks every tier
}

// Init creates a repository in an empty backend: key file first, config
// last.
func Init(ctx context.Context, be backend.Backend, password []byte, o InitOptions) (InitResult, error) {
	if _, err := be.Stat(ctx, backend.Handle{Type: backend.Config, Name: "config"}); err == nil {
		return InitResult{}, fmt.Errorf("%w at %s", ErrRepoExists, be.Location())
	} else if !errors.Is(err, backend.ErrNotFound) {
		return InitResult{}, err
	}
	if t, err := firstStored(ctx, be); err != nil {
		return InitResult{}, err
	} else if t != "" {
		return InitResult{}, fmt.Errorf("%w at %s: %s; or choose another location", ErrRepoExists, be.Location(), withoutConfig(ctx, be, t))
	}
	p := Params{Version: FormatVersion, Created: time.Now().UTC().Truncate(time.Second), PackSize: o.PackSize,
		Compression: o.Compression, Chunker: o.Chunker}
	if _, err := rand.Read(p.ID[:]); err != nil {
		return InitResult{}, err
	}
	if p.PackSize == 0 {
		p.PackSize = DefaultPackSize
	}
	if p.Compression == "" {
		p.Compression = pack.CompressFastest
	}
	if p.Chunker == (chunk.Params{}) {
		p.Chunker = chunk.DefaultParams
	}
	if o.KDF.Algorithm == "" {
		o.KDF = crypt.NewKDFParams(0, 0, 0)
	}
	keys := crypt.NewMasterKeys()
	cfg, _, err := newConfig(keys, p)
	if err != nil {
		return InitResult{}, err
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return InitResult{}, err
	}
	if _, err := decodeConfig(data, be.Location()); err != nil {
		return InitResult{}, fmt.Errorf("invalid init options: %w", err)
	}
	keyID, err := saveKeyFile(ctx, be, keys, blob.Tiers, password, o.KDF, p.ID, p.Created, o.KeyCache)
	if err != nil {
		return InitResult{}, err
	}
	if err := be.Save(ctx, backend.Handle{Type: backend.Config, Name: "config"}, data); err != nil {
		// The key file unlocks nothing without this config: it goes, so
		// that init can run here again (best effort, also when ctx ended).
		_ = be.Remove(context.WithoutCancel(ctx), backend.Handle{Type: backend.Key, Name: keyID.String()})
		if errors.Is(err, backend.ErrExists) { // another process initialised it meanwhile
			return InitResult{}, fmt.Errorf("%w at %s (created by another process while this init ran): %w", ErrRepoExists, be.Location(), err)
		}
		return InitResult{}, fmt.Errorf("saving config: %w", err)
	}
	return InitResult{ID: p.ID, KeyID: keyID}, nil
}

// Open unlocks the repository in be with password and brings its local
// index up to date.
func Open(ctx context.Context, be backend.Backend, password []byte, o Options) (*Repository, error) {
	cfg, err := loadConfig(ctx, be)
	if err != nil {
		return nil, err
	}
	keys, keyID, err := unlock(ctx, be, cfg.ID, password, o.KeyHint, o.KeyCache)
	if err != nil {
		return nil, err
	}
	pols, err := cfg.openSections(keys)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults(cfg)
	r := &Repository{be: be, cfg: cfg, keys: keys, keyID: keyID, pols: pols, opts: o, now: o.Now,
		pending: map[pendingKey]*pendingBlob{}, unindexed: map[blob.Tier][]index.PackInfo{},
		packers: map[packerKey]*packerSet{}, condemned: map[blob.ID]condemnedObject{}, uploadStart: map[blob.ID]startTime{}, uploads: make(chan struct{}, o.Uploads), inflight: map[uint64]bool{},
		seals: make(chan struct{}, runtime.GOMAXPROCS(0))}
	r.cond = sync.NewCond(&r.mu)
	r.chunkers = newChunkers(pols, cfg.Chunker)
	r.bg, r.cancel = context.WithCancel(context.Background())
	if o.NoIndexDB {
		return r, nil
	}
	// Opened only now, not while the key is derived (it needs no key): the
	// first open of a cache an older Lifeboat wrote reads every page of the
	// file (to store bbolt's free list), and when every open did, beside
	// argon2's memory that raised an unchanged re-capture's peak from 66 to
	// 105 MiB to save 18 ms.
	if r.idx, err = index.OpenDB(filepath.Join(o.CacheDir, cfg.ID.String()), cfg.ID); err != nil {
		return nil, err
	}
	if _, err := r.SyncIndex(ctx); err != nil {
		_ = r.idx.Close()
		return nil, err
	}
	return r, nil
}

func (o Options) withDefaults(cfg *Config) Options {
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.Packers <= 0 {
		o.Packers = 2
	}
	if o.Uploads <= 0 {
		o.Uploads = 2
	}
	if o.PackSize <= 0 {
		o.PackSize = cfg.PackSize
	}
	if o.Compress == "" {
		o.Compress = cfg.Compression
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionLimit <= 0 {
		o.SessionLimit = DefaultSessionLimit
	}
	return o
}

// SyncIndex brings the local index up to date with the repository. When
// the cache turns out corrupt it is deleted and rebuilt once.
// Damaged index objects are skipped (their blobs are then saved again if
// needed) and remembered for Check and RepairIndex.
func (r *Repository) SyncIndex(ctx context.Context) (index.SyncStats, error) {
	st, err := r.idx.Sync(ctx, indexSource{r})
	if errors.Is(err, index.ErrCorrupt) {
		dir := filepath.Dir(r.idx.Path())
		_ = r.idx.Close()
		_ = os.Remove(r.idx.Path())
		if r.idx, err = index.OpenDB(dir, r.cfg.ID); err != nil {
			return st, err
		}
		st, err = r.idx.Sync(ctx, indexSource{r})
	}
	r.mu.Lock()
	r.damagedIndex = st.Damaged
	r.mu.Unlock()
	return st, err
}

// Config returns the repository's public parameters.
func (r *Repository) Config() Params { return r.cfg.Params }

// Backend returns the storage the repository lives in.
func (r *Repository) Backend() backend.Backend { return r.be }

// Keys returns the tier keys the open key unlocks.
func (r *Repository) TierKeys(t blob.Tier) (*crypt.TierKeys, error) { return r.keys.Tier(t) }

// Index is the local index (nil when opened with NoIndexDB).
func (r *Repository) Index() *index.DB { return r.idx }

// Close refuses new saves, waits for those under way, flushes, and closes
// the local index. Later calls return the first call's result.
func (r *Repository) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closing = true
		for r.busy > 0 {
			r.cond.Wait()
		}
		r.mu.Unlock()
		if r.idx != nil {
			r.closeErr = errors.Join(r.flush(ctx), r.idx.Close())
		}
		r.cancel()
	})
	return r.closeErr
}
