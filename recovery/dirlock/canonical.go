package dirlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxLinks bounds the symlinks followed while resolving one path, like the
// kernel's ELOOP limit.
const maxLinks = 40

// Canonical names target the way the lock table does: an absolute path,
// cleaned, with every symlink among its existing parents resolved. ".." is
// taken as the kernel takes it: the parent of what the path so far resolves
// to (so "l/../t", with l a symlink to a/b, is a/t, not ./t). Components
// that do not exist yet are kept as written: a directory created there
// later has that name. A trailing slash is ignored.
//
// The last component itself is never resolved, even when it is a symlink:
// the operations the lock guards replace that entry (a staging tree is
// switched in place of it), so the lock's name must not depend on what the
// entry is at the moment.
func Canonical(target string) (string, error) {
	if target == "" {
		return "", errors.New("dirlock: empty target path")
	}
	if strings.IndexByte(target, 0) >= 0 {
		return "", fmt.Errorf("dirlock: target path %q contains a NUL byte", target)
	}
	p := target
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("dirlock: making %q absolute: %w", target, err)
		}
		// Not filepath.Join: it would clean ".." lexically.
		p = wd + string(os.PathSeparator) + p
	}
	out, err := resolveParents(p)
	if err != nil {
		return "", fmt.Errorf("dirlock: resolving target %s: %w", target, err)
	}
	return out, nil
}

// resolveParents walks the absolute path p component by component.
func resolveParents(p string) (string, error) {
	sep := string(os.PathSeparator)
	rest := strings.Split(p, sep)
	resolved := sep
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		if onlyEmpty(rest) {
			return next, nil // the last component: kept, not resolved
		}
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			resolved = next // created later under this name
			continue
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink != 0:
			links++
			if links > maxLinks {
				return "", fmt.Errorf("more than %d symlinks at %s", maxLinks, next)
			}
			link, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			if filepath.IsAbs(link) {
				resolved = sep
			}
			rest = append(strings.Split(link, sep), rest...)
		case !fi.IsDir():
			return "", fmt.Errorf("%s is not a directory", next)
		default:
			resolved = next
		}
	}
	return resolved, nil
}

func onlyEmpty(rest []string) bool {
	for _, c := range rest {
		if c != "" {
			return false
		}
	}
	return true
}
