package ssh

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"lifeboat/providers/fsmeta"
)

// remoteMeta is what the host's tools say about an instance tree beyond
// SFTP's listing.
type remoteMeta struct {
	// entries maps the slash path of every entry ("." for the root) to
	// what GNU find says of it, nanosecond mtime included; nil without it.
	entries map[string]hostEntry
	// groups maps the slash path of each regular file with more than one
	// name to its inode ("dev:ino"), from GNU find; nil without it.
	groups map[string]string
	// xattrs maps slash paths ("." for the root) to their user.*
	// attributes, from getfattr; nil without it.
	xattrs map[string][]fsmeta.Xattr
}

// readRemoteMeta runs find and getfattr (each where the host has it) in
// the instance directory inst, in one command: find's NUL-terminated
// records (findFormat, every entry, crossing mount points as SFTP's
// listing does), an empty record, then getfattr's dump. A path they cannot read
// is an *fsmeta.EntryError naming it.
func readRemoteMeta(ctx context.Context, c *conn, inst, where string, hs hostSupport, xattrs bool) (remoteMeta, error) {
	var rm remoteMeta
	script := "cd " + shQuote(inst) + " || exit 20\ns=0\n"
	if hs.find {
		rm.entries, rm.groups = map[string]hostEntry{}, map[string]string{}
		script += `find . -printf '` + findFormat + `' || s=1` + "\n"
	}
	script += `printf '\0'` + "\n"
	if hs.getfattr && xattrs {
		rm.xattrs = map[string][]fsmeta.Xattr{}
		script += `getfattr -R -P -h -d -m '^user\.' -e base64 -- . || s=1` + "\n"
	}
	script += "exit $s\n"
	if rm.groups == nil && rm.xattrs == nil {
		return rm, nil
	}
	exit, stderr, err := c.runParse(ctx, script, func(r *bufio.Reader) error {
		entries, groups := rm.entries, rm.groups
		if entries == nil {
			entries, groups = map[string]hostEntry{}, map[string]string{}
		}
		if err := parseFind(r, entries, groups); err != nil || rm.xattrs == nil {
			return err
		}
		return parseGetfattr(r, rm.xattrs)
	})
	switch {
	case err != nil:
		return rm, err
	case exit == 0:
		return rm, nil
	case deniedPath(stderr) != "":
		return rm, &fsmeta.EntryError{Verb: "read", Rel: deniedPath(stderr), Where: where, Err: deniedErrno(stderr)}
	}
	return rm, fmt.Errorf("reading mtimes, links and xattrs of %s failed (exit %d): %s", where, exit, firstLine(stderr))
}

// parseGetfattr reads getfattr's dump: "# file: <path>" then
// "<name>=0s<base64>" lines, a blank line after each file. Paths and names
// have control characters and backslashes escaped as \ooo.
func parseGetfattr(r *bufio.Reader, into map[string][]fsmeta.Xattr) error {
	cur := ""
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "# file: "):
			cur = strings.TrimPrefix(unescapeOctal(line[len("# file: "):]), "./")
			if cur == "" {
				cur = "."
			}
		case line == "":
		case cur == "":
			return fmt.Errorf("getfattr printed %q before any file", line)
		default:
			name, val, _ := strings.Cut(line, "=")
			v, derr := decodeAttrValue(val)
			if derr != nil {
				return fmt.Errorf("getfattr value of %s on %s: %w", name, cur, derr)
			}
			into[cur] = append(into[cur], fsmeta.Xattr{Name: unescapeOctal(name), Value: v})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	for _, xs := range into {
		slices.SortFunc(xs, func(a, b fsmeta.Xattr) int { return strings.Compare(a.Name, b.Name) })
	}
	return nil
}

// unescapeOctal undoes getfattr's quoting: \ooo is the byte ooo.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// decodeAttrValue decodes a getfattr value: 0s base64, 0x hex, "text".
func decodeAttrValue(v string) ([]byte, error) {
	switch {
	case v == "":
		return nil, nil
	case strings.HasPrefix(v, "0s"):
		return base64.StdEncoding.DecodeString(v[2:])
	case strings.HasPrefix(v, "0x"):
		return hex.DecodeString(v[2:])
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		return []byte(unescapeOctal(v[1 : len(v)-1])), nil
	}
	return nil, fmt.Errorf("unknown encoding %q", v)
}
