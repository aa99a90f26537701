package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"

	"lifeboat/snapshot"
)

// setMeta fills n's metadata from st (not its type, size or content).
func (c *capturer) setMeta(n *snapshot.Node, st *unix.Stat_t) {
	n.Mode = st.Mode & 07777
	n.UID, n.GID = st.Uid, st.Gid
	n.User, n.Group = c.users.user(st.Uid), c.users.group(st.Gid)
	n.MtimeNs = st.Mtim.Nano()
}

// capNames caches user and group name lookups ("" when unknown).
type capNames struct {
	mu            sync.Mutex
	users, groups map[uint32]string
	lookupUser    func(string) (*user.User, error)
	lookupGroup   func(string) (*user.Group, error)
}

func newCapNames() *capNames {
	return &capNames{users: map[uint32]string{}, groups: map[uint32]string{},
		lookupUser: user.LookupId, lookupGroup: user.LookupGroupId}
}

func (c *capNames) user(id uint32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.users[id]
	if !ok {
		if u, err := c.lookupUser(strconv.FormatUint(uint64(id), 10)); err == nil {
			name = u.Username
		}
		c.users[id] = name
	}
	return name
}

func (c *capNames) group(id uint32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.groups[id]
	if !ok {
		if g, err := c.lookupGroup(strconv.FormatUint(uint64(id), 10)); err == nil {
			name = g.Name
		}
		c.groups[id] = name
	}
	return name
}

// capOpenat opens name relative to dirfd with O_CLOEXEC and, where the
// kernel allows it (the caller owns the file or is root), O_NOATIME.
func capOpenat(dirfd int, name string, flags int) (int, error) {
	flags |= unix.O_CLOEXEC
	for _, extra := range []int{unix.O_NOATIME, 0} {
		var fd int
		err := osutil.IgnoringEINTR(func() (err error) { fd, err = unix.Openat(dirfd, name, flags|extra, 0); return err })
		if err == unix.EPERM && extra != 0 {
			continue
		}
		return fd, err
	}
	panic("unreachable")
}

// capDirentBufs holds getdents buffers (*[]byte of 64 KiB), one per
// directory being listed, reused from directory to directory.
var capDirentBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// capReadNames lists every entry of the directory open as fd, but "." and
// "..". The names are raw bytes in strings (capParseNames). With limit > 0
// it stops at limit+1 names, the listing then incomplete.
func capReadNames(fd, limit int) ([]string, error) {
	bp := capDirentBufs.Get().(*[]byte)
	defer capDirentBufs.Put(bp)
	buf := *bp
	var names []string
	for {
		var n int
		if err := osutil.IgnoringEINTR(func() (err error) { n, err = unix.Getdents(fd, buf); return err }); err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		most := -1 // names to parse: all
		if limit > 0 {
			most = limit + 1 - len(names)
		}
		names = capParseNames(buf[:n], most, names)
		if limit > 0 && len(names) > limit {
			return names, nil
		}
	}
}

// The fields of a linux_dirent64 record as getdents writes it.
var (
	capDirentReclen = int(unsafe.Offsetof(unix.Dirent{}.Reclen))
	capDirentName   = int(unsafe.Offsetof(unix.Dirent{}.Name))
)

// capParseNames appends to names those of the dirent records in b, as
// unix.ParseDirent does on Linux (at most most of them, -1: all; "." and
// ".." left out), but copies them into one block shared by
// the strings: one allocation per getdents call rather than one per name,
// which a capture of an unchanged tree, doing little else per entry,
// feels.
func capParseNames(b []byte, most int, names []string) []string {
	size, count := 0, 0 // every name with its NUL padding: more than the names need
	for r := b; len(r) > capDirentName; count++ {
		reclen := int(binary.NativeEndian.Uint16(r[capDirentReclen:]))
		if reclen <= capDirentName || reclen > len(r) {
			break
		}
		size += reclen - capDirentName
		r = r[reclen:]
	}
	if most >= 0 {
		count = min(count, most)
	}
	names = slices.Grow(names, count)
	block := make([]byte, 0, size) // never grown: the strings stay put
	for most != 0 && len(b) > capDirentName {
		reclen := int(binary.NativeEndian.Uint16(b[capDirentReclen:]))
		if reclen <= capDirentName || reclen > len(b) {
			break // not a record the kernel writes
		}
		name := b[capDirentName:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		b = b[reclen:]
		if string(name) == "." || string(name) == ".." {
			continue
		}
		most--
		if len(name) == 0 {
			names = append(names, "")
			continue
		}
		start := len(block)
		block = append(block, name...)
		names = append(names, unsafe.String(&block[start], len(name)))
	}
	return names
}

// capNameBytes returns name, a string of capParseNames, as the bytes of
// a node's name without copying them: nothing writes to a node's name.
func capNameBytes(name string) []byte {
	if name == "" {
		return []byte{} // as []byte(name) gives
	}
	return unsafe.Slice(unsafe.StringData(name), len(name))
}

// capReadlink returns the target of symlink name in dirfd.
func capReadlink(dirfd int, name string) ([]byte, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return nil, err
		}
		if n < size {
			return buf[:n], nil
		}
	}
}

// capXattrsFd returns the user.* extended attributes of the open file fd.
func capXattrsFd(fd int) ([]snapshot.Xattr, error) {
	return capXattrs(
		func(b []byte) (int, error) { return unix.Flistxattr(fd, b) },
		func(name string, b []byte) (int, error) { return unix.Fgetxattr(fd, name, b) })
}

// capXattrsAt returns the user.* extended attributes of entry name of the
// directory open as dirfd, without opening the entry: through
// /proc/self/fd, which keeps the path short however deep the directory.
// Without /proc it opens the entry instead. An entry gone since it was
// listed has none.
func capXattrsAt(dirfd int, name string) ([]snapshot.Xattr, error) {
	var xs []snapshot.Xattr
	var err error
	if capHaveProcFd() {
		p := "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
		xs, err = capXattrs(
			func(b []byte) (int, error) { return unix.Llistxattr(p, b) },
			func(attr string, b []byte) (int, error) { return unix.Lgetxattr(p, attr, b) })
	} else {
		var fd int
		if fd, err = capOpenat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY); err == nil {
			xs, err = capXattrsFd(fd)
			_ = unix.Close(fd)
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	return xs, err
}

var capHaveProcFd = sync.OnceValue(func() bool {
	var st unix.Stat_t
	return unix.Stat("/proc/self/fd", &st) == nil
})

// capXattrs reads user.* attributes with list and get, in listing order.
// Filesystems without xattrs give none.
func capXattrs(list func([]byte) (int, error), get func(string, []byte) (int, error)) ([]snapshot.Xattr, error) {
	return osutil.ReadXattrs(func(name string) bool { return strings.HasPrefix(name, "user.") }, list, get,
		func(name string, val []byte) snapshot.Xattr { return snapshot.Xattr{Name: name, Value: val} })
}
