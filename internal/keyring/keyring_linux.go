package keyring

import "golang.org/x/sys/unix"

// possessorOnly lets the possessor view, read, write, search, link and
// set the attributes of a key, and nobody else do anything with it.
const possessorOnly = 0x3f000000

// Get returns the value named name, or nil when there is none (expired,
// never kept, or no keyring to read).
func (c *Cache) Get(name string) []byte {
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", name, 0)
	if err != nil {
		return nil
	}
	buf := make([]byte, maxValue)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil || n > len(buf) {
		return nil
	}
	return buf[:n]
}

// Put keeps value under name for the cache's TTL, replacing an entry of
// that name. A keyring that refuses it (quota, seccomp, no keyrings in
// this kernel) leaves the cache without it.
func (c *Cache) Put(name string, value []byte) {
	id, err := unix.AddKey("user", name, value, unix.KEY_SPEC_USER_KEYRING)
	if err != nil {
		return
	}
	// The timeout first: an entry must never outlive it, even if the
	// permissions cannot be narrowed (then it goes at once).
	if _, err := unix.KeyctlInt(unix.KEYCTL_SET_TIMEOUT, id, int(c.TTL.Seconds()), 0, 0); err != nil {
		c.remove(id)
		return
	}
	if err := unix.KeyctlSetperm(id, possessorOnly); err != nil {
		c.remove(id)
	}
}

func (c *Cache) remove(id int) {
	if _, err := unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0); err != nil {
		_, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0)
	}
}

// Available says whether this process can keep and read entries: the
// kernel has keyrings and lets this process use them.
func Available() bool {
	_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, true)
	return err == nil
}
