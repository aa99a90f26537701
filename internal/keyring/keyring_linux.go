package keyring

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Open returns a cache whose entries live for ttl (1 s to MaxTTL, in
// whole seconds rounded up), sealed with the secret kept in dir (made,
// with dir, if missing). It fails when the secret cannot be made or read,
// or is not a regular file of 32 bytes owned by this user that no one
// else may read.
func Open(ttl time.Duration, dir string) (*Cache, error) {
	if ttl <= 0 || ttl > MaxTTL {
		return nil, fmt.Errorf("key cache time %s: want more than 0 and at most %s", ttl, MaxTTL)
	}
	secret, err := loadSecret(dir)
	if err != nil {
		return nil, err
	}
	return &Cache{ttl: (ttl + time.Second - 1).Truncate(time.Second), secret: secret}, nil
}

// loadSecret reads the cache's secret from dir, making it first if there
// is none.
func loadSecret(dir string) ([]byte, error) {
	path := filepath.Join(dir, secretFile)
	if b, err := readSecret(path); !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	// Made whole under a temporary name and linked into place, so that
	// no reader ever sees a partial secret; the first process to link
	// wins and the others read its secret.
	tmp, err := os.CreateTemp(dir, ".key-cache-secret-*")
	if err != nil {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("key cache: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	return readSecret(path)
}

// possessorOnly lets the possessor view, read, write, search, link and
// set the attributes of a key, and nobody else do anything with it.
const possessorOnly = 0x3f000000

// readSecret reads the secret at path: a regular file of 32 bytes, owned
// by this user, that no one else may read or write, not a symlink.
func readSecret(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("key cache: %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) || st.Mode&0o077 != 0 || st.Size != 32 {
		return nil, fmt.Errorf("key cache: %s is not a 32-byte file of this user's that only it may read (mode %o, owner %d, %d bytes); remove it", path, st.Mode, st.Uid, st.Size)
	}
	b := make([]byte, 32)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("key cache: %s: %w", path, err)
	}
	return b, nil
}

// Get returns the value named name, or nil when there is none (expired,
// never kept, or no keyring to read).
func (c *Cache) Get(name string) []byte {
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", name, 0)
	if err != nil {
		return nil
	}
	buf := make([]byte, maxValue)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if errors.Is(err, unix.EACCES) {
		// Found through @u but not possessed: a session keyring without
		// @u (a systemd service's own). Keeping an entry from here would
		// only replace the one the user's other processes use.
		c.unreadable = true
	}
	if err != nil || n > len(buf) {
		return nil
	}
	return buf[:n]
}

// Put keeps value under name for the cache's TTL, replacing an entry of
// that name. The entry is made in this process's keyring, given its
// timeout and permissions there, and then moved to @u: an entry is never
// in @u without them, and if this process dies before the move, its
// keyring goes with it. A keyring that refuses any step (a quota half
// used, seccomp, no keyrings in this kernel) leaves the cache without it.
func (c *Cache) Put(name string, value []byte) {
	if c.unreadable || !roomFor(len(name)+len(value)) {
		return
	}
	id, err := unix.AddKey("user", name, value, unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		return
	}
	defer unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_PROCESS_KEYRING, 0, 0)
	if _, err := unix.KeyctlInt(unix.KEYCTL_SET_TIMEOUT, id, int(c.ttl/time.Second), 0, 0); err != nil {
		return
	}
	if err := unix.KeyctlSetperm(id, possessorOnly); err != nil {
		return
	}
	if _, err := unix.KeyctlInt(unix.KEYCTL_MOVE, id, unix.KEY_SPEC_PROCESS_KEYRING, unix.KEY_SPEC_USER_KEYRING, 0); err == nil || !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
		return
	}
	// Kernels before 5.1 have no KEYCTL_MOVE: link it into @u (which
	// replaces an entry of the same name), and the deferred unlink
	// drops it from this process's keyring.
	_, _ = unix.KeyctlInt(unix.KEYCTL_LINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0)
}

// roomFor says whether the user's key quota has room for an entry of
// size bytes (name and value) with half of it to spare: other programs
// (Kerberos, fscrypt, the NFS id mapper) keep keys there too, and the
// quota of a user other than root is small (200 keys, 20,000 bytes by
// default).
func roomFor(size int) bool {
	f, err := os.Open("/proc/key-users")
	if err != nil {
		return false
	}
	defer f.Close()
	uid := strconv.Itoa(os.Geteuid()) + ":"
	s := bufio.NewScanner(f)
	for s.Scan() {
		// "  uid:  usage nkeys/ninstantiated keys/maxkeys bytes/maxbytes"
		fields := strings.Fields(s.Text())
		if len(fields) != 5 || fields[0] != uid {
			continue
		}
		keys, maxKeys, ok1 := fraction(fields[3])
		bytes, maxBytes, ok2 := fraction(fields[4])
		return ok1 && ok2 && 2*(keys+1) <= maxKeys && 2*(bytes+int64(size)) <= maxBytes
	}
	return true // no line yet: this user holds no key at all
}

// fraction parses "a/b".
func fraction(s string) (int64, int64, bool) {
	a, b, ok := strings.Cut(s, "/")
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return x, y, ok && err1 == nil && err2 == nil
}
