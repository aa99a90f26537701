package snapshot

import (
	"bytes"
	"encoding/base64"
	"math"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"lifeboat/blob"
)

// decodeCanonicalTree parses b when it is in the canonical form appendTree
// writes (docs/format.md §11.2): keys in struct order, no whitespace,
// nothing after the object, version 1, integers without sign or leading
// zeros that fit their field, []byte fields as null or unescaped base64,
// ids as 64 hex characters. It also takes the variants of that form whose
// meaning encoding/json defines unambiguously: an omitempty field present
// with a zero or empty value, any JSON string escape, raw invalid UTF-8.
// For everything else it returns ok false and the caller decodes with
// encoding/json. Where it returns ok true, the Tree is reflect.DeepEqual
// to what encoding/json decodes from b (nil for null, non-nil empty for []
// and "", invalid UTF-8 and lone surrogates as U+FFFD), which the tests
// check on random trees, mutated encodings and fuzzed input.
//
// It makes a few allocations per tree, not per node: the nodes, one buffer
// for all []byte fields, one string for all string fields, one array of
// ids, one of xattrs. None of them alias b. Its scratch space comes from a
// pool. A hostile b costs at most about 4 times its size, mostly nodes (224
// bytes each for at least 60 bytes of input), and about 9 times when the
// scratch space is allocated anew (100,000 empty xattrs, whose spans grow
// by append); encoding/json: up to 20 times.
func decodeCanonicalTree(b []byte) (t *Tree, ok bool) {
	if len(b) > math.MaxInt32 { // spans are int32
		return nil, false
	}
	p := treeParsers.Get().(*treeParser)
	t, ok = p.decode(b)
	if len(b) <= maxPooledTree {
		p.reset(nil)
		treeParsers.Put(p)
	}
	return t, ok
}

// decode parses b with p's scratch space (grown as needed).
func (p *treeParser) decode(b []byte) (t *Tree, ok bool) {
	p.reset(b)
	defer func() {
		if r := recover(); r != nil && r != errNotCanonical {
			panic(r)
		}
	}()
	t = p.tree()
	return t, t != nil
}

// maxPooledTree is the largest input whose parser (scratch space about
// proportional to it) goes back to the pool; a tree of MaxNodesPerBlob
// typical file entries is about 2 MiB.
const maxPooledTree = 4 << 20

var treeParsers = sync.Pool{New: func() any { return new(treeParser) }}

// errNotCanonical is what the parser panics with when the input leaves
// the canonical form; decodeCanonicalTree recovers it and reports ok false.
var errNotCanonical = new(int)

// minNodeJSON is the shortest node the parser accepts, so a tree of n
// bytes has fewer than n/len(minNodeJSON) nodes.
const minNodeJSON = `{"name":"","type":"","mode":0,"uid":0,"gid":0,"mtime_ns":0},`

// span locates one decoded value in the parser's scratch buffers: [off,
// end) of raw, str, ids or xattrs. The zero span is an absent or null
// value: a nil slice, an empty string.
type span struct {
	off, end int32
	set      bool
}

// sub returns the part of all that s locates, capacity limited so that an
// append to it cannot overwrite the next value; nil when s is not set.
func sub[T any](all []T, s span) []T {
	if !s.set {
		return nil
	}
	return all[s.off:s.end:s.end]
}

// nodeSpans holds where a node's slice and string fields were decoded;
// typ is set only for a type that is not one of the NodeType constants.
type nodeSpans struct {
	name, typ, user, group, linkTarget, linkPath, xattrs, content, subtree span
}

type xattrSpans struct{ name, value span }

// treeParser is the state of one decodeCanonicalTree call. Its scratch
// buffers are reused through treeParsers; the Tree it returns is built
// from copies of them.
type treeParser struct {
	b      []byte
	i      int // next byte of b to read
	raw    []byte
	str    []byte
	ids    []blob.ID
	xattrs []xattrSpans
	spans  []nodeSpans
}

func (p *treeParser) reset(b []byte) {
	p.b, p.i = b, 0
	p.raw, p.str, p.ids, p.xattrs, p.spans = p.raw[:0], p.str[:0], p.ids[:0], p.xattrs[:0], p.spans[:0]
}

func (p *treeParser) fail() { panic(errNotCanonical) }

// accept consumes lit if the input continues with it.
func (p *treeParser) accept(lit string) bool {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}

func (p *treeParser) expect(lit string) {
	if !p.accept(lit) {
		p.fail()
	}
}

// list parses null (false) or a JSON array (true), calling elem for each
// element.
func (p *treeParser) list(elem func()) bool {
	if p.accept("null") {
		return false
	}
	p.expect("[")
	if p.accept("]") {
		return true
	}
	for {
		elem()
		if p.accept("]") {
			return true
		}
		p.expect(",")
	}
}

// tree parses the whole input and builds the Tree.
func (p *treeParser) tree() *Tree {
	p.expect(`{"version":1,"nodes":`)
	var nodes []Node
	isSet := p.list(func() {
		if nodes == nil {
			n := p.countNodes()
			nodes = make([]Node, 0, n)
			// Sized once: grown by append from empty scratch, the spans
			// alone cost about 9 times the smallest nodes' input.
			if cap(p.spans) < n {
				p.spans = make([]nodeSpans, 0, n)
			}
		}
		if len(nodes) == MaxNodesPerBlob {
			p.fail() // encoding/json reports the count
		}
		var prev *nodeSpans
		if len(p.spans) > 0 {
			prev = &p.spans[len(p.spans)-1]
		}
		nodes = append(nodes, Node{})
		p.spans = append(p.spans, nodeSpans{})
		p.node(&nodes[len(nodes)-1], &p.spans[len(p.spans)-1], prev)
	})
	p.expect("}")
	if p.i != len(p.b) {
		p.fail()
	}
	if isSet && nodes == nil {
		nodes = []Node{}
	}
	return p.build(nodes)
}

// countNodes returns at least the number of nodes the input holds if it
// is canonical, and never more than its length allows: every node and
// xattr starts with '{', which base64 and hex never hold, though a string
// may.
func (p *treeParser) countNodes() int {
	return min(bytes.Count(p.b, []byte("{"))-1, len(p.b)/len(minNodeJSON), MaxNodesPerBlob)
}

// node parses one node into n, recording its slice and string fields in
// sp; prev is the node before, whose user and group strings are reused
// when equal.
func (p *treeParser) node(n *Node, sp, prev *nodeSpans) {
	p.expect(`{"name":`)
	sp.name = p.base64()
	p.expect(`,"type":`)
	n.Type, sp.typ = p.nodeType()
	p.expect(`,"mode":`)
	n.Mode = uint32(p.digits(math.MaxUint32))
	p.expect(`,"uid":`)
	n.UID = uint32(p.digits(math.MaxUint32))
	p.expect(`,"gid":`)
	n.GID = uint32(p.digits(math.MaxUint32))
	if p.accept(`,"user":`) {
		sp.user = p.string()
		if prev != nil {
			sp.user = p.reuse(sp.user, prev.user)
		}
	}
	if p.accept(`,"group":`) {
		sp.group = p.string()
		if prev != nil {
			sp.group = p.reuse(sp.group, prev.group)
		}
	}
	p.expect(`,"mtime_ns":`)
	n.MtimeNs = p.int64()
	if p.accept(`,"size":`) {
		n.Size = p.digits(math.MaxUint64)
	}
	if p.accept(`,"link_target":`) {
		sp.linkTarget = p.base64()
	}
	if p.accept(`,"link_path":`) {
		sp.linkPath = p.base64()
	}
	if p.accept(`,"xattrs":`) {
		sp.xattrs = p.xattrList()
	}
	if p.accept(`,"content":`) {
		sp.content = p.idList()
	}
	if p.accept(`,"subtree":`) {
		sp.subtree = p.idList()
	}
	p.expect("}")
}

// nodeType parses a node's type: one of the NodeType constants without a
// copy, any other string as a span of str.
func (p *treeParser) nodeType() (NodeType, span) {
	s := p.string()
	var t NodeType
	switch string(p.str[s.off:s.end]) {
	case "file":
		t = TypeFile
	case "dir":
		t = TypeDir
	case "symlink":
		t = TypeSymlink
	case "hardlink":
		t = TypeHardlink
	case "fifo":
		t = TypeFIFO
	case "socket":
		t = TypeSocket
	case "device":
		t = TypeDevice
	default:
		return "", s
	}
	p.str = p.str[:s.off]
	return t, span{}
}

// reuse returns prev instead of s, the string just decoded, when both hold
// the same bytes, dropping s from str.
func (p *treeParser) reuse(s, prev span) span {
	if prev.set && bytes.Equal(p.str[s.off:s.end], p.str[prev.off:prev.end]) {
		p.str = p.str[:s.off]
		return prev
	}
	return s
}

func (p *treeParser) xattrList() span {
	off := len(p.xattrs)
	if !p.list(p.xattr) {
		return span{}
	}
	return span{int32(off), int32(len(p.xattrs)), true}
}

func (p *treeParser) xattr() {
	p.expect(`{"name":`)
	name := p.string()
	p.expect(`,"value":`)
	value := p.base64()
	p.expect("}")
	p.xattrs = append(p.xattrs, xattrSpans{name, value})
}

func (p *treeParser) idList() span {
	off := len(p.ids)
	if !p.list(p.id) {
		return span{}
	}
	return span{int32(off), int32(len(p.ids)), true}
}

// id parses a blob id as 64 hex characters in quotes: what encoding/json
// passes to blob.ID.UnmarshalText, which takes exactly the bytes
// hex.Decode takes (either case).
func (p *treeParser) id() {
	const n = 2 * blob.IDSize
	if len(p.b)-p.i < n+2 || p.b[p.i] != '"' || p.b[p.i+n+1] != '"' {
		p.fail()
	}
	p.ids = append(p.ids, blob.ID{})
	id, src := &p.ids[len(p.ids)-1], (*[n]byte)(p.b[p.i+1:p.i+n+1])
	var bad byte
	for i := range id {
		hi, lo := hexValue[src[2*i]], hexValue[src[2*i+1]]
		bad |= hi | lo
		id[i] = hi<<4 | lo
	}
	if bad > 0xf {
		p.fail()
	}
	p.i += n + 2
}

// hexValue maps hex digits to their value and all other bytes to 0xff.
var hexValue = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			t[c] = byte(c - 'A' + 10)
		default:
			t[c] = 0xff
		}
	}
	return t
}()

// digits parses a JSON integer without sign, 0 or digits not starting
// with 0, of at most limit (encoding/json refuses a number its field
// cannot hold).
func (p *treeParser) digits(limit uint64) uint64 {
	b := p.b[p.i:]
	var v uint64
	n := 0
	for ; n < len(b) && n < 19 && b[n]-'0' <= 9; n++ { // below 10^19: no overflow
		v = v*10 + uint64(b[n]-'0')
	}
	if n < len(b) && b[n]-'0' <= 9 { // a 20th digit; a 21st never fits
		d := uint64(b[n] - '0')
		if n++; v > (math.MaxUint64-d)/10 || n < len(b) && b[n]-'0' <= 9 {
			p.fail()
		}
		v = v*10 + d
	}
	if n == 0 || b[0] == '0' && n > 1 || v > limit {
		p.fail()
	}
	p.i += n
	return v
}

func (p *treeParser) int64() int64 {
	if p.accept("-") {
		return -int64(p.digits(1 << 63)) // -(1<<63) wraps to math.MinInt64
	}
	return int64(p.digits(math.MaxInt64))
}

// base64 parses a []byte field as encoding/json does: null as nil, a
// string as padded standard base64 decoded with base64.StdEncoding.Decode
// into raw. A string with other bytes than base64's (escapes; CR and LF,
// which Decode would skip but JSON forbids raw) is left to encoding/json.
func (p *treeParser) base64() span {
	if p.accept("null") {
		return span{}
	}
	p.expect(`"`)
	end := p.i
	for end < len(p.b) && base64Char[p.b[end]] {
		end++
	}
	if end == len(p.b) || p.b[end] != '"' {
		p.fail()
	}
	src := p.b[p.i:end]
	off := len(p.raw)
	p.raw = append(p.raw, make([]byte, base64.StdEncoding.DecodedLen(len(src)))...)
	n, err := base64.StdEncoding.Decode(p.raw[off:], src)
	if err != nil {
		p.fail()
	}
	p.raw = p.raw[:off+n]
	p.i = end + 1
	return span{int32(off), int32(len(p.raw)), true}
}

// base64Char lists the bytes of padded standard base64.
var base64Char = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=" {
		t[c] = true
	}
	return t
}()

// plainJSON lists the bytes a JSON string holds as themselves: ASCII from
// 0x20 except '"' and '\\'.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// string parses a JSON string into str, unescaped as encoding/json does:
// each byte of invalid UTF-8 becomes U+FFFD.
func (p *treeParser) string() span {
	p.expect(`"`)
	off := len(p.str)
	for {
		j := p.i
		for j < len(p.b) && plainJSON[p.b[j]] {
			j++
		}
		p.str = append(p.str, p.b[p.i:j]...)
		p.i = j
		if j == len(p.b) {
			p.fail()
		}
		switch c := p.b[j]; {
		case c == '"':
			p.i++
			return span{int32(off), int32(len(p.str)), true}
		case c == '\\':
			p.escape()
		case c < 0x20:
			p.fail()
		default:
			r, size := utf8.DecodeRune(p.b[j:])
			p.str = utf8.AppendRune(p.str, r)
			p.i += size
		}
	}
}

// escape parses one backslash escape of a string into str. As in
// encoding/json, a \u escape of a surrogate takes the next \u escape with
// it when the two make a pair, and is U+FFFD otherwise.
func (p *treeParser) escape() {
	if len(p.b)-p.i < 2 {
		p.fail()
	}
	c := p.b[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		p.str = append(p.str, c)
	case 'b':
		p.str = append(p.str, '\b')
	case 'f':
		p.str = append(p.str, '\f')
	case 'n':
		p.str = append(p.str, '\n')
	case 'r':
		p.str = append(p.str, '\r')
	case 't':
		p.str = append(p.str, '\t')
	case 'u':
		r := hex4(p.b[p.i:])
		if r < 0 {
			p.fail()
		}
		p.i += 4
		if utf16.IsSurrogate(r) {
			r2 := rune(-1)
			if len(p.b)-p.i >= 6 && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
				r2 = hex4(p.b[p.i+2:])
			}
			if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
				p.i += 6
			}
		}
		p.str = utf8.AppendRune(p.str, r)
	default:
		p.fail()
	}
}

// hex4 returns the value of 4 hex digits (either case) at the start of b,
// or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// build returns the Tree of nodes, setting their slice and string fields
// from copies of the scratch buffers: one allocation each for all []byte
// fields, all strings, all ids and all xattrs.
func (p *treeParser) build(nodes []Node) *Tree {
	raw := make([]byte, len(p.raw)) // non-nil even when empty: "" decodes to a non-nil []byte
	copy(raw, p.raw)
	str := string(p.str)
	ids := make([]blob.ID, len(p.ids))
	copy(ids, p.ids)
	xattrs := make([]Xattr, len(p.xattrs))
	for i, x := range p.xattrs {
		xattrs[i] = Xattr{Name: str[x.name.off:x.name.end], Value: sub(raw, x.value)}
	}
	for i := range nodes {
		n, sp := &nodes[i], &p.spans[i]
		n.Name = sub(raw, sp.name)
		if sp.typ.set {
			n.Type = NodeType(str[sp.typ.off:sp.typ.end])
		}
		n.User = str[sp.user.off:sp.user.end]
		n.Group = str[sp.group.off:sp.group.end]
		n.LinkTarget = sub(raw, sp.linkTarget)
		n.LinkPath = sub(raw, sp.linkPath)
		n.Xattrs = sub(xattrs, sp.xattrs)
		n.Content = sub(ids, sp.content)
		n.Subtree = sub(ids, sp.subtree)
	}
	return &Tree{Version: TreeVersion, Nodes: nodes}
}
