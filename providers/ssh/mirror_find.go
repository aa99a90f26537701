package ssh

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// findFormat is the -printf format of the one GNU find run per ReadFiles:
// for every entry of the instance tree (its root too, with an empty %P),
// "type links size dev:ino mtime path\0". The mtime is %T@, which GNU
// find prints as st_mtim's tv_sec, a dot, and tv_nsec in 9 digits and a
// trailing 0 (findutils 4.9: "1614834367.1234567890"; before 1970 the
// seconds are negative and the digits still tv_nsec: "-1.9000000000" is
// tv_sec -1, tv_nsec 900000000). parseFindTime reads it back as exactly
// that pair, without going through a float.
const findFormat = `%y %n %s %D:%i %T@ %P\0`

// hostEntry is what GNU find said about one path of the instance tree.
type hostEntry struct {
	typ   byte // find's %y: 'f' regular, 'd' directory, 'l' symlink, 'p' fifo, ...
	size  int64
	mtime time.Time
}

// parseFind reads find's findFormat records up to an empty one into
// entries (slash paths, "." for the root) and, for each regular file with
// more than one link, its inode ("dev:ino") into groups.
func parseFind(r *bufio.Reader, entries map[string]hostEntry, groups map[string]string) error {
	for {
		rec, err := r.ReadString(0)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading find's records: %w", err)
		}
		rec = strings.TrimSuffix(rec, "\x00")
		if rec == "" {
			return nil
		}
		rel, e, links, key, err := parseFindRecord(rec)
		if err != nil {
			return err
		}
		entries[rel] = e
		if e.typ == 'f' && links > 1 {
			groups[rel] = key
		}
	}
}

func parseFindRecord(rec string) (rel string, e hostEntry, links uint64, key string, err error) {
	f := strings.SplitN(rec, " ", 6)
	bad := func(why string, args ...any) error {
		return fmt.Errorf("find printed a malformed record %q: %s", rec, fmt.Sprintf(why, args...))
	}
	if len(f) != 6 || len(f[0]) != 1 {
		return "", e, 0, "", bad("want 6 fields")
	}
	e.typ, key, rel = f[0][0], f[3], f[5]
	if links, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return "", e, 0, "", bad("link count: %v", err)
	}
	if e.size, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return "", e, 0, "", bad("size: %v", err)
	}
	if dev, ino, ok := strings.Cut(key, ":"); !ok || dev == "" || ino == "" {
		return "", e, 0, "", bad("inode %q", key)
	}
	if e.mtime, err = parseFindTime(f[4]); err != nil {
		return "", e, 0, "", bad("%v", err)
	}
	if rel == "" {
		rel = "."
	}
	return rel, e, links, key, nil
}

// parseFindTime reads find's %T@ ("[-]sec[.digits]") as time.Unix(sec,
// ns): the digits are tv_nsec, the first nine of them nanoseconds, any
// more must be zeros (find adds one). No float is involved, so the
// result is exact.
func parseFindTime(s string) (time.Time, error) {
	whole, frac, dotted := strings.Cut(s, ".")
	digits := strings.TrimPrefix(whole, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" || (dotted && frac == "") {
		return time.Time{}, fmt.Errorf("mtime %q is not [-]seconds[.fraction]", s)
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("mtime %q: %w", s, err)
	}
	if strings.Trim(frac, "0123456789") != "" || (len(frac) > 9 && strings.Trim(frac[9:], "0") != "") {
		return time.Time{}, fmt.Errorf("mtime %q has a fraction finer than nanoseconds or not decimal", s)
	}
	var ns int64
	for i := range 9 {
		ns *= 10
		if i < len(frac) {
			ns += int64(frac[i] - '0')
		}
	}
	return time.Unix(sec, ns), nil
}
