package snapshot

import (
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"unicode/utf8"

	"lifeboat/blob"
)

// appendTree appends the tree blob encoding of nodes to dst: exactly the
// bytes json.Marshal(Tree{Version: TreeVersion, Nodes: nodes}) writes.
// Tree ids are hashes of these bytes, so a difference of one byte would
// break dedup against every stored snapshot; the tests compare the two
// encoders on random and fuzzed nodes. It follows encoding/json's rules:
// fields in struct order, omitempty fields left out when zero or empty,
// []byte as padded standard base64 (nil as null), strings escaped as
// HTML-safe JSON, blob ids as quoted hex (their MarshalText).
func appendTree(dst []byte, nodes []Node) []byte {
	dst = append(dst, `{"version":`...)
	dst = strconv.AppendInt(dst, TreeVersion, 10)
	dst = append(dst, `,"nodes":`...)
	if nodes == nil {
		return append(dst, `null}`...)
	}
	dst = append(dst, '[')
	for i := range nodes {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendNode(dst, &nodes[i])
	}
	return append(dst, `]}`...)
}

// treeSizeHint returns the encoded size of nodes when no string needs
// escaping, or a little more (numbers are counted at their widest), so
// appendTree writes into one allocation.
func treeSizeHint(nodes []Node) int {
	b64 := base64.StdEncoding.EncodedLen
	const idLen = 2*blob.IDSize + 3 // quoted hex and a comma
	n := len(`{"version":1,"nodes":null}`)
	for i := range nodes {
		nd := &nodes[i]
		// Always present: punctuation, keys and the widest numbers.
		n += len(`{"name":"","type":"","mode":,"uid":,"gid":,"mtime_ns":},`) + 3*10 + 20
		n += b64(len(nd.Name)) + len(nd.Type)
		if nd.User != "" {
			n += len(`,"user":""`) + len(nd.User)
		}
		if nd.Group != "" {
			n += len(`,"group":""`) + len(nd.Group)
		}
		if nd.Size != 0 {
			n += len(`,"size":`) + 20
		}
		if len(nd.LinkTarget) > 0 {
			n += len(`,"link_target":""`) + b64(len(nd.LinkTarget))
		}
		if len(nd.LinkPath) > 0 {
			n += len(`,"link_path":""`) + b64(len(nd.LinkPath))
		}
		if len(nd.Xattrs) > 0 {
			n += len(`,"xattrs":[]`)
			for _, x := range nd.Xattrs {
				n += len(`{"name":"","value":""},`) + len(x.Name) + b64(len(x.Value))
			}
		}
		if len(nd.Content) > 0 {
			n += len(`,"content":[]`) + idLen*len(nd.Content)
		}
		if len(nd.Subtree) > 0 {
			n += len(`,"subtree":[]`) + idLen*len(nd.Subtree)
		}
	}
	return n
}

// appendNode appends one node as encoding/json writes a Node.
func appendNode(dst []byte, n *Node) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendJSONBytes(dst, n.Name)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, string(n.Type))
	dst = append(dst, `,"mode":`...)
	dst = strconv.AppendUint(dst, uint64(n.Mode), 10)
	dst = append(dst, `,"uid":`...)
	dst = strconv.AppendUint(dst, uint64(n.UID), 10)
	dst = append(dst, `,"gid":`...)
	dst = strconv.AppendUint(dst, uint64(n.GID), 10)
	if n.User != "" {
		dst = append(dst, `,"user":`...)
		dst = appendJSONString(dst, n.User)
	}
	if n.Group != "" {
		dst = append(dst, `,"group":`...)
		dst = appendJSONString(dst, n.Group)
	}
	dst = append(dst, `,"mtime_ns":`...)
	dst = strconv.AppendInt(dst, n.MtimeNs, 10)
	if n.Size != 0 {
		dst = append(dst, `,"size":`...)
		dst = strconv.AppendUint(dst, n.Size, 10)
	}
	if len(n.LinkTarget) > 0 {
		dst = append(dst, `,"link_target":`...)
		dst = appendJSONBytes(dst, n.LinkTarget)
	}
	if len(n.LinkPath) > 0 {
		dst = append(dst, `,"link_path":`...)
		dst = appendJSONBytes(dst, n.LinkPath)
	}
	if len(n.Xattrs) > 0 {
		dst = append(dst, `,"xattrs":[`...)
		for i, x := range n.Xattrs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = appendJSONString(dst, x.Name)
			dst = append(dst, `,"value":`...)
			dst = appendJSONBytes(dst, x.Value)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(n.Content) > 0 {
		dst = append(dst, `,"content":`...)
		dst = appendJSONIDs(dst, n.Content)
	}
	if len(n.Subtree) > 0 {
		dst = append(dst, `,"subtree":`...)
		dst = appendJSONIDs(dst, n.Subtree)
	}
	return append(dst, '}')
}

// appendJSONBytes appends b as encoding/json writes a []byte: null when
// nil, otherwise padded standard base64 in quotes.
func appendJSONBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, `null`...)
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendJSONIDs appends ids as encoding/json writes a []blob.ID: an array
// of their MarshalText forms, 64 lowercase hex characters in quotes (hex
// needs no escaping).
func appendJSONIDs(dst []byte, ids []blob.ID) []byte {
	dst = append(dst, '[')
	for i := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = hex.AppendEncode(dst, ids[i][:])
		dst = append(dst, '"')
	}
	return append(dst, ']')
}

// jsonSafe lists the ASCII bytes encoding/json writes unescaped with HTML
// escaping on (json.Marshal's default): printable ASCII and DEL, except
// '"', '\\', '<', '>' and '&'.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\<>&` {
		t[b] = false
	}
	return t
}()

const lowerHex = "0123456789abcdef"

// appendJSONString appends s as json.Marshal writes a string: quoted;
// '"' and '\\' backslash-escaped; \b, \f, \n, \r, \t by name; other
// control bytes and '<', '>', '&' as \u00XX; U+2028 and U+2029 as \u2028
// and \u2029; each byte of invalid UTF-8 as \ufffd; all else as is.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[b>>4], lowerHex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
