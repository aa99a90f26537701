package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"lifeboat/internal/keylock"
	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// Name is this adapter's name in errors and configuration.
const Name = "local"

// Reserved directories under the root; instance ids never start with '.',
// so they cannot collide.
const (
	metaDir        = ".lifeboat"
	stagingDir     = metaDir + "/staging"
	checkpointsDir = metaDir + "/checkpoints"
	trashDir       = metaDir + "/trash"
	switchingDir   = metaDir + "/switching"
	stoppedDir     = metaDir + "/stopped"
	probeDir       = metaDir + "/probe"
)

// Provider keeps workspace instances as directories under one root.
type Provider struct {
	root string
	now  func() time.Time

	locks keylock.Map[providers.InstanceID] // serialises the mutating operations on one instance in this process

	supportMu sync.Mutex
	support   *providers.FileSupport // probed once, see FileSupport
}

var (
	_ providers.Provider      = (*Provider)(nil)
	_ providers.Stopper       = (*Provider)(nil)
	_ providers.FileSupporter = (*Provider)(nil)
)

// New returns a Provider over the directory root. The root is not opened
// here: an absent or unreadable root makes each call fail with
// KindUnavailable, so a provider can be configured before its disk is
// mounted.
func New(root string) *Provider {
	abs, err := filepath.Abs(root)
	if err == nil {
		root = abs
	}
	return &Provider{root: filepath.Clean(root), now: time.Now}
}

// Root is the directory the instances live under.
func (p *Provider) Root() string { return p.root }

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider: everything but Pause (a
// directory has no processes of its own to pause; callers quiesce through
// Exec) and BrowserProfile (a profile in the directory is captured as files
// like any other; there is no provider-side browser to stop).
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, NativeCheckpoints: true, Exec: true, Create: true}
}

// ValidID reports whether s can name an instance (providers.ValidName):
// a single plain name, so nothing outside the root can be named.
func ValidID(s string) bool { return providers.ValidName(s) }

func checkID(op string, id providers.InstanceID) error {
	if !ValidID(string(id)) {
		return invalid(op, id, "instance id %q is not a plain name (letters, digits, '.', '_', '-', not starting with '.', at most %d bytes)", string(id), providers.MaxNameLen)
	}
	return nil
}

// openRoot opens the root for one call. It is opened per call, not held,
// so a root that vanished or was remounted is seen as it is now.
func (p *Provider) openRoot(ctx context.Context, op string, id providers.InstanceID) (*os.Root, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(op, id, err)
	}
	r, err := os.OpenRoot(p.root)
	if err != nil {
		e := wrap(op, id, err).(*providers.Error)
		e.Kind = providers.KindUnavailable // whatever stops us opening the root is an outage, never "missing"
		e.Err = fmt.Errorf("root %s cannot be opened (check that it is mounted and readable): %w", p.root, err)
		return nil, e
	}
	return r, nil
}

// statInstance returns the instance directory's info; (nil, nil) when it
// does not exist.
func statInstance(r *os.Root, op string, id providers.InstanceID) (fs.FileInfo, error) {
	fi, err := r.Lstat(string(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(op, id, err)
	}
	if !fi.IsDir() {
		return nil, conflict(op, id, "%s is a %s, not a workspace directory; move it out of the root", filepath.Join(r.Name(), string(id)), kindName(fi.Mode()))
	}
	return fi, nil
}

func kindName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "regular file"
	default:
		return "special file"
	}
}

// Inspect implements providers.Provider. A directory is Running, or
// Stopped after Stop (its marker says when); a name that does not exist
// under a readable root is Missing, unless a Switch fallback was interrupted with the old tree
// parked, which is reported as KindConflict so nothing recovers over it.
func (p *Provider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	const op = "inspect"
	if err := checkID(op, id); err != nil {
		return providers.Status{}, err
	}
	r, err := p.openRoot(ctx, op, id)
	if err != nil {
		return providers.Status{}, err
	}
	defer r.Close()
	fi, err := statInstance(r, op, id)
	if err != nil {
		return providers.Status{}, err
	}
	now := p.now()
	if fi != nil {
		return p.liveStatus(r, op, id, now)
	}
	if _, err := r.Lstat(filepath.Join(switchingDir, string(id))); err == nil {
		return providers.Status{}, conflict(op, id, "a switch of this instance was interrupted; its previous tree is kept at %s: move it back to %s or remove it",
			filepath.Join(p.root, switchingDir, string(id)), filepath.Join(p.root, string(id)))
	}
	// Make sure the root itself is still readable: a missing name in a
	// directory we cannot list proves nothing.
	d, err := r.Open(".")
	if err == nil {
		_, err = d.Readdirnames(1)
		d.Close()
	}
	if err != nil && !errors.Is(err, errEOF) {
		return providers.Status{}, wrap(op, id, fmt.Errorf("root %s is not readable: %w", p.root, err))
	}
	return providers.Status{State: providers.Missing, Instance: id, Detail: "no directory " + filepath.Join(p.root, string(id)), ObservedAt: now}, nil
}

// IDForKey is the instance id Create derives from an idempotency key, so a
// retried Create finds the same directory even after a restart.
func IDForKey(key string) providers.InstanceID {
	return providers.InstanceID(providers.KeyedName(key))
}

// Create implements providers.Provider. The id is derived from the
// idempotency key (IDForKey), so a second Create with the same key returns
// the same instance, across processes and restarts, as long as it exists;
// with an empty key each call makes a new instance. Template, when set,
// names an existing instance under the root whose tree is copied (reflinked
// where the filesystem allows); it never names a path outside the root.
// Labels are not stored. The tree is built in staging and renamed into
// place with RENAME_NOREPLACE, so a crash leaves no half-made instance.
func (p *Provider) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	const op = "create"
	id := IDForKey(spec.IdempotencyKey)
	if spec.IdempotencyKey == "" {
		id = providers.InstanceID("ws-" + randHex(16))
	}
	if spec.Template != "" {
		if err := checkID(op, providers.InstanceID(spec.Template)); err != nil {
			return "", invalid(op, id, "template %q must name an instance under the root: %v", spec.Template, err)
		}
	}
	defer p.locks.Lock(id)()
	r, err := p.openRoot(ctx, op, id)
	if err != nil {
		return "", err
	}
	defer r.Close()
	fi, err := statInstance(r, op, id)
	if err != nil || fi != nil {
		return id, err // already made by an earlier call with this key
	}
	build, err := p.newStaging(r, op, id, "create")
	if err != nil {
		return "", err
	}
	if spec.Template != "" {
		names := trees{src: "template instance " + spec.Template, dst: "the new instance " + string(id)}
		tfi, err := statInstance(r, op, providers.InstanceID(spec.Template))
		if err == nil && tfi == nil {
			err = invalid(op, id, "template instance %q does not exist under %s", spec.Template, p.root)
		}
		if err == nil {
			err = scanRel(ctx, r, spec.Template, names)
		}
		if err == nil {
			err = copyBetween(ctx, r, spec.Template, build, names, true)
		}
		if err != nil {
			p.discard(r, build)
			return "", wrap(op, id, err)
		}
	}
	err = p.clearStopped(r, id) // a marker left by an instance removed behind our back
	if err == nil {
		err = renameNoReplace(r, build, string(id))
	}
	if errors.Is(err, fs.ErrExist) || errors.Is(err, errNotEmpty) {
		p.discard(r, build) // another process made it first with the same key
		return id, nil
	}
	if err != nil {
		p.discard(r, build)
		return "", wrap(op, id, err)
	}
	return id, wrap(op, id, syncDir(r, "."))
}

// Destroy implements providers.Provider: the directory is renamed into the
// trash (atomic: the instance is either there or gone), then removed, and
// so is its stopped marker (see Stop). Checkpoints of the instance are
// kept; delete them with DeleteCheckpoint.
func (p *Provider) Destroy(ctx context.Context, id providers.InstanceID) error {
	const op = "destroy"
	if err := checkID(op, id); err != nil {
		return err
	}
	defer p.locks.Lock(id)()
	r, err := p.openRoot(ctx, op, id)
	if err != nil {
		return err
	}
	defer r.Close()
	fi, err := statInstance(r, op, id)
	if err != nil {
		return err
	}
	if fi == nil {
		return wrap(op, id, p.clearStopped(r, id))
	}
	if err := r.MkdirAll(trashDir, 0o700); err != nil {
		return wrap(op, id, err)
	}
	t := filepath.Join(trashDir, string(id)+"."+randHex(8))
	if err := r.Rename(string(id), t); err != nil {
		return wrap(op, id, err)
	}
	if err := syncDir(r, "."); err != nil {
		return wrap(op, id, err)
	}
	if err := p.clearStopped(r, id); err != nil {
		return wrap(op, id, err)
	}
	return wrap(op, id, fsmeta.RemoveTree(r, t))
}

// newStaging makes a fresh directory under .lifeboat/staging and returns
// its path relative to the root. A refusal to create it is KindPermission
// naming the directory.
func (p *Provider) newStaging(r *os.Root, op string, id providers.InstanceID, what string) (string, error) {
	rel := filepath.Join(stagingDir, string(id)+"."+what+"."+randHex(8))
	err := r.MkdirAll(stagingDir, 0o700)
	if err == nil {
		err = r.Mkdir(rel, 0o700)
	}
	if err != nil && isPermission(err) {
		return "", wrap(op, id, &entryError{Verb: "create", Rel: filepath.Base(rel), Where: filepath.Join(p.root, stagingDir), Dest: true, Err: err})
	}
	if err != nil {
		return "", wrap(op, id, err)
	}
	return rel, nil
}

// discard removes a staging tree after a failure; errors are ignored
// because the tree is inside .lifeboat and harmless.
func (p *Provider) discard(r *os.Root, rel string) { _ = fsmeta.RemoveTree(r, rel) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
