package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"lifeboat/internal/keylock"
	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// Name is this adapter's name in errors and configuration.
const Name = "ssh"

const (
	metaDir      = ".lifeboat"
	stagingDir   = metaDir + "/staging"
	switchingDir = metaDir + "/switching"
	trashDir     = metaDir + "/trash"
)

// Config says how to reach the host and where instances live on it.
type Config struct {
	Addr string // host:port
	User string
	// Signers are the client keys tried for public-key authentication.
	Signers []ssh.Signer
	// KeyFile, when set, is the file the Signers came from (the
	// configuration's key_file), named with them when the host refuses
	// them.
	KeyFile string
	// KnownHosts is an OpenSSH known_hosts file holding the host's key, or
	// HostKey pins it directly; exactly one must be set. A host whose key
	// does not match is refused (KindUnauthorized, code host-key-mismatch).
	KnownHosts string
	HostKey    ssh.PublicKey
	// Root is the absolute directory on the host that holds the instances.
	Root string
	// CacheDir is the local directory for ReadFiles mirrors, one
	// subdirectory per instance, kept between calls so later reads only
	// transfer what changed.
	CacheDir string
	// DialTimeout bounds connecting and the SSH handshake (default 15 s);
	// ctx deadlines apply as well.
	DialTimeout time.Duration
}

// Provider keeps instances as directories on one SSH host.
type Provider struct {
	cfg      Config
	hostKeys ssh.HostKeyCallback
	now      func() time.Time

	locks keylock.Map[providers.InstanceID] // instance -> held while its mirror is in use (ReadFiles to Files.Close)

	hsMu      sync.Mutex
	hs        *hostSupport                  // probed once, see FileSupport
	limitHost func(hostSupport) hostSupport // tests: a host without some tools
}

var (
	_ providers.Provider      = (*Provider)(nil)
	_ providers.FileSupporter = (*Provider)(nil)
)

// New checks cfg and returns a Provider. Nothing is dialled yet.
func New(cfg Config) (*Provider, error) {
	switch {
	case cfg.Addr == "" || cfg.User == "":
		return nil, errors.New("ssh provider: Addr and User are required")
	case len(cfg.Signers) == 0:
		return nil, errors.New("ssh provider: no client key (Signers) configured")
	case (cfg.KnownHosts == "") == (cfg.HostKey == nil):
		return nil, errors.New("ssh provider: set exactly one of KnownHosts (a known_hosts file) and HostKey (a pinned key); host keys are always checked")
	case !path.IsAbs(cfg.Root) || path.Clean(cfg.Root) == "/":
		return nil, fmt.Errorf("ssh provider: Root %q must be an absolute directory other than /", cfg.Root)
	case cfg.CacheDir == "":
		return nil, errors.New("ssh provider: CacheDir (local mirror directory) is required")
	}
	cfg.Root = path.Clean(cfg.Root)
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 15 * time.Second
	}
	p := &Provider{cfg: cfg, now: time.Now}
	if cfg.KnownHosts != "" {
		if _, err := knownhosts.New(cfg.KnownHosts); err != nil {
			return nil, fmt.Errorf("ssh provider: known_hosts %s: %w", cfg.KnownHosts, err)
		}
		p.hostKeys = knownHostsCallback(cfg.KnownHosts)
	} else {
		p.hostKeys = pinnedCallback(cfg.HostKey)
	}
	return p, nil
}

// knownHostsCallback checks a host key against the known_hosts file,
// read again at every connection (it is small), so a fixed file is used
// from the next connection on, without restarting serve.
func knownHostsCallback(file string) ssh.HostKeyCallback {
	return func(host string, remote net.Addr, key ssh.PublicKey) error {
		cb, err := knownhosts.New(file)
		if err != nil {
			return &hostKeyError{"known-hosts", fmt.Errorf("cannot check the host key of %s: known_hosts %s: %w: refusing to connect (fix the file; it is read again at every connection)", host, file, err)}
		}
		err = cb(host, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) > 0 {
				return &hostKeyError{"host-key-mismatch", fmt.Errorf("host key of %s (%s %s) does not match %s: refusing to connect (the host was reinstalled or someone is in the middle; check the key, then update known_hosts: it is read again at every connection)",
					host, key.Type(), ssh.FingerprintSHA256(key), file)}
			}
			return &hostKeyError{"host-key-unknown", fmt.Errorf("host %s (%s %s) is not in %s: refusing to connect (add its key after checking it)",
				host, key.Type(), ssh.FingerprintSHA256(key), file)}
		}
		return err
	}
}

func pinnedCallback(want ssh.PublicKey) ssh.HostKeyCallback {
	return func(host string, _ net.Addr, key ssh.PublicKey) error {
		if !bytes.Equal(key.Marshal(), want.Marshal()) {
			return &hostKeyError{"host-key-mismatch", fmt.Errorf("host key of %s (%s %s) is not the pinned key %s: refusing to connect",
				host, key.Type(), ssh.FingerprintSHA256(key), ssh.FingerprintSHA256(want))}
		}
		return nil
	}
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider. Native checkpoints and pause
// are not offered: a plain SSH host has no snapshot API (a reflink copy
// through Exec would depend on the host's filesystem and coreutils).
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, Exec: true, Create: true}
}

// conn is one SSH connection with its SFTP session.
type conn struct {
	ssh  *ssh.Client
	sftp *sftp.Client
	stop func() bool
}

func (c *conn) Close() {
	c.stop()
	c.sftp.Close()
	c.ssh.Close()
}

// dial connects, checks the host key, authenticates and opens SFTP; a
// cancelled ctx closes the connection so every blocked call returns.
func (p *Provider) dial(ctx context.Context, op string, id providers.InstanceID) (*conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(op, id, err)
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", p.cfg.Addr)
	if err != nil {
		return nil, wrap(op, id, fmt.Errorf("connect to %s: %w", p.cfg.Addr, err))
	}
	if dl, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stopHandshake := context.AfterFunc(dctx, func() { nc.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(nc, p.cfg.Addr, &ssh.ClientConfig{
		User:            p.cfg.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(p.cfg.Signers...)},
		HostKeyCallback: p.hostKeys,
		Timeout:         p.cfg.DialTimeout,
	})
	stopped := stopHandshake()
	if err != nil {
		nc.Close()
		if !stopped && ctx.Err() != nil {
			err = ctx.Err()
		}
		if strings.Contains(err.Error(), "ssh: unable to authenticate") {
			err = p.refusedKeys(err)
		}
		return nil, wrap(op, id, fmt.Errorf("ssh to %s@%s: %w", p.cfg.User, p.cfg.Addr, err))
	}
	_ = nc.SetDeadline(time.Time{})
	client := ssh.NewClient(sc, chans, reqs)
	sc2, err := sftp.NewClient(client)
	if err != nil {
		client.Close()
		return nil, wrap(op, id, fmt.Errorf("sftp session on %s: %w", p.cfg.Addr, err))
	}
	c := &conn{ssh: client, sftp: sc2}
	c.stop = context.AfterFunc(ctx, func() { client.Close() })
	return c, nil
}

// ctxErr prefers ctx's error over the broken-connection error a cancelled
// call produces.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func checkID(op string, id providers.InstanceID) error {
	if !providers.ValidName(string(id)) {
		return newErr(op, id, providers.KindInvalid, "instance id %q is not a plain name (letters, digits, '.', '_', '-', not starting with '.', at most %d bytes)", string(id), providers.MaxNameLen)
	}
	return nil
}

func (p *Provider) instDir(id providers.InstanceID) string { return path.Join(p.cfg.Root, string(id)) }

// statInstance checks the root, then the instance: (nil, nil) when the
// root is there and the instance is not. An absent root is an outage (an
// unmounted disk), never Missing.
func (p *Provider) statInstance(c *conn, op string, id providers.InstanceID) (os.FileInfo, error) {
	rfi, err := c.sftp.Lstat(p.cfg.Root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, newErr(op, id, providers.KindUnavailable, "root %s does not exist on %s (check that it is mounted): %w", p.cfg.Root, p.cfg.Addr, err)
		}
		return nil, wrap(op, id, fmt.Errorf("root %s on %s: %w", p.cfg.Root, p.cfg.Addr, err))
	}
	if !rfi.IsDir() {
		return nil, newErr(op, id, providers.KindUnavailable, "root %s on %s is not a directory", p.cfg.Root, p.cfg.Addr)
	}
	fi, err := c.sftp.Lstat(p.instDir(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(op, id, err)
	}
	if !fi.IsDir() {
		return nil, newErr(op, id, providers.KindConflict, "%s on %s is not a workspace directory (%v); move it out of the root", p.instDir(id), p.cfg.Addr, fi.Mode().Type())
	}
	return fi, nil
}

// needInstance is statInstance for data-plane calls: an absent instance is
// KindConflict (only Inspect says Missing).
func (p *Provider) needInstance(c *conn, op string, id providers.InstanceID) error {
	fi, err := p.statInstance(c, op, id)
	if err == nil && fi == nil {
		err = newErr(op, id, providers.KindConflict, "instance directory %s does not exist on %s (Inspect confirms whether it is missing)", p.instDir(id), p.cfg.Addr)
	}
	return err
}

// Inspect implements providers.Provider: Running when the directory is
// there, Missing when the host answered and the root is there but the
// directory is not (and no Switch left it parked), an *Error otherwise.
func (p *Provider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	const op = "inspect"
	if err := checkID(op, id); err != nil {
		return providers.Status{}, err
	}
	c, err := p.dial(ctx, op, id)
	if err != nil {
		return providers.Status{}, err
	}
	defer c.Close()
	fi, err := p.statInstance(c, op, id)
	if err != nil {
		return providers.Status{}, wrap(op, id, ctxErr(ctx, err))
	}
	where := p.cfg.Addr + ":" + p.instDir(id)
	if fi != nil {
		return providers.Status{State: providers.Running, Instance: id, Detail: "directory " + where, ObservedAt: p.now()}, nil
	}
	if _, err := c.sftp.Lstat(path.Join(p.cfg.Root, switchingDir, string(id))); err == nil {
		return providers.Status{}, newErr(op, id, providers.KindConflict, "a switch of this instance was interrupted; its previous tree is kept at %s on %s: move it back or remove it",
			path.Join(p.cfg.Root, switchingDir, string(id)), p.cfg.Addr)
	} else if !errors.Is(err, os.ErrNotExist) {
		return providers.Status{}, wrap(op, id, ctxErr(ctx, err))
	}
	return providers.Status{State: providers.Missing, Instance: id, Detail: "no directory " + where, ObservedAt: p.now()}, nil
}

// Create implements providers.Provider: the directory is named after the
// idempotency key (providers.KeyedName), so a retried Create, from any
// process, finds the one the first made. Template is not supported
// (KindUnsupported); Labels are not stored.
func (p *Provider) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	const op = "create"
	id := providers.InstanceID(providers.KeyedName(spec.IdempotencyKey))
	if spec.IdempotencyKey == "" {
		id = providers.InstanceID("ws-" + randHex(16))
	}
	if spec.Template != "" {
		return "", newErr(op, id, providers.KindUnsupported, "the ssh adapter does not copy templates; create empty and restore into it")
	}
	c, err := p.dial(ctx, op, id)
	if err != nil {
		return "", err
	}
	defer c.Close()
	fi, err := p.statInstance(c, op, id)
	if err != nil || fi != nil {
		return id, wrap(op, id, ctxErr(ctx, err))
	}
	if err := c.sftp.Mkdir(p.instDir(id)); err != nil {
		// Lost a race with another Create of the same key: fine if it is a
		// directory now.
		if fi, serr := c.sftp.Lstat(p.instDir(id)); serr == nil && fi.IsDir() {
			return id, nil
		}
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	return id, nil
}

// Destroy implements providers.Provider: the directory is renamed into the
// trash (so it is gone at once), then removed, and so is the instance's
// local mirror; an absent one is fine.
func (p *Provider) Destroy(ctx context.Context, id providers.InstanceID) error {
	const op = "destroy"
	if err := checkID(op, id); err != nil {
		return err
	}
	c, err := p.dial(ctx, op, id)
	if err != nil {
		return err
	}
	defer c.Close()
	fi, err := p.statInstance(c, op, id)
	if err != nil {
		return err
	}
	if fi == nil {
		p.dropMirror(id)
		return nil
	}
	trash := path.Join(p.cfg.Root, trashDir)
	if err := c.sftp.MkdirAll(trash); err != nil {
		return wrap(op, id, ctxErr(ctx, err))
	}
	t := path.Join(trash, string(id)+"."+randHex(8))
	if err := c.sftp.PosixRename(p.instDir(id), t); err != nil {
		return wrap(op, id, ctxErr(ctx, err))
	}
	if err := removeRemote(c.sftp, t); err != nil {
		return wrap(op, id, ctxErr(ctx, err))
	}
	p.dropMirror(id)
	return nil
}

// dropMirror removes the local mirror of a destroyed instance, unless a
// ReadFiles still holds it (its Files not closed yet): then it stays, and
// a later Destroy or the operator removes it.
func (p *Provider) dropMirror(id providers.InstanceID) {
	p.locks.IfUnlocked(id, func() {
		if r, err := os.OpenRoot(p.cfg.CacheDir); err == nil {
			_ = fsmeta.RemoveTree(r, string(id))
			r.Close()
		}
	})
}

// Checkpoint implements providers.Provider: unsupported.
func (p *Provider) Checkpoint(ctx context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	return "", unsupported("checkpoint", id)
}

// Rollback implements providers.Provider: unsupported.
func (p *Provider) Rollback(ctx context.Context, id providers.InstanceID, cp providers.CheckpointID) (providers.InstanceID, error) {
	return "", unsupported("rollback", id)
}

// DeleteCheckpoint implements providers.Provider: unsupported.
func (p *Provider) DeleteCheckpoint(ctx context.Context, cp providers.CheckpointID) error {
	return unsupported("delete checkpoint", "")
}

func unsupported(op string, id providers.InstanceID) error {
	return newErr(op, id, providers.KindUnsupported, "the ssh adapter has no native checkpoints")
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mirrorDir is the local mirror of an instance.
func (p *Provider) mirrorDir(id providers.InstanceID) string {
	return filepath.Join(p.cfg.CacheDir, string(id))
}

// refusedKeys says which client keys the host refused, for which user,
// and what to do; err (the handshake's "ssh: unable to authenticate ...")
// stays in the message, which classify reads.
func (p *Provider) refusedKeys(err error) error {
	fps := make([]string, len(p.cfg.Signers))
	for i, s := range p.cfg.Signers {
		fps[i] = s.PublicKey().Type() + " " + ssh.FingerprintSHA256(s.PublicKey())
	}
	key := "client key " + strings.Join(fps, ", ")
	if p.cfg.KeyFile != "" {
		key = "key_file " + p.cfg.KeyFile + " (" + strings.Join(fps, ", ") + ")"
	}
	host, _, _ := net.SplitHostPort(p.cfg.Addr)
	return fmt.Errorf("the host refused %s for user %s: add its public key to %s's ~/.ssh/authorized_keys on %s, or set key_file and user to a key and user the host accepts (%w)",
		key, p.cfg.User, p.cfg.User, host, err)
}
