package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"lifeboat/blob"
	"lifeboat/internal/seedtest"
)

// The tree encoder must write exactly what json.Marshal writes for a Tree:
// tree ids are hashes of these bytes. json.Marshal is the reference here
// and only here.

// genSource is what the node generator draws from: a seeded *rand.Rand in
// the property test, the fuzzer's bytes in FuzzEncodeTree.
type genSource interface {
	IntN(n int) int
	Uint64() uint64
}

// fuzzSource reads decisions from fuzzer bytes (1 byte for a choice of at
// most 256, else 8); once they run out every draw is 0, which ends lists.
type fuzzSource struct{ data []byte }

func (f *fuzzSource) take(k int) uint64 {
	var b [8]byte
	f.data = f.data[copy(b[:k], f.data):]
	return binary.LittleEndian.Uint64(b[:])
}

func (f *fuzzSource) Uint64() uint64 { return f.take(8) }

func (f *fuzzSource) IntN(n int) int {
	if n <= 256 {
		return int(f.take(1) % uint64(n))
	}
	return int(f.take(8) % uint64(n))
}

// hostilePieces are byte strings every escaping rule of encoding/json
// applies to: control bytes (named and \u00XX), quote and backslash, the
// HTML characters, DEL, multi-byte UTF-8, U+2028/2029, U+FFFD itself, and
// invalid UTF-8 (lone continuation bytes, overlong forms, truncated
// sequences, surrogates, code points above U+10FFFF).
var hostilePieces = []string{
	"\x00", "\x01", "\x07", "\b", "\t", "\n", "\v", "\f", "\r", "\x1b", "\x1f",
	`"`, `\`, "<", ">", "&", "'", "/", "=", "+", "\x7f", "a", "Z", "0", " ", "user.x",
	"é", "€", "\u2027", "\u2028", "\u2029", "\u202a", "\ufffd", "😀", "\U0010ffff",
	"\x80", "\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xe2\x80", "\xe2\x80\xa8\xa8",
	"\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x9f\x98", "\xf4\x90\x80\x80", "\xf5", "\xfe", "\xff",
}

func genBytes(s genSource) []byte {
	switch s.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2: // all 256 byte values are possible
		b := make([]byte, s.IntN(70))
		for i := range b {
			b[i] = byte(s.IntN(256))
		}
		return b
	case 3:
		return []byte("file" + string(rune('a'+s.IntN(26))) + ".go")
	default:
		var b []byte
		for range 1 + s.IntN(8) {
			b = append(b, hostilePieces[s.IntN(len(hostilePieces))]...)
		}
		return b
	}
}

func genString(s genSource) string { return string(genBytes(s)) }

// extremes holds the integers every field draws from besides random ones.
var extremes = []uint64{0, 1, 9, 10, 99, 100, 07777, math.MaxUint32, math.MaxUint32 + 1,
	math.MaxInt64, 1 << 63, math.MaxUint64, math.MaxUint64 - 1}

func genU64(s genSource) uint64 {
	switch s.IntN(3) {
	case 0:
		return extremes[s.IntN(len(extremes))]
	case 1:
		return uint64(s.IntN(1 << 20))
	}
	return s.Uint64() >> s.IntN(64)
}

func genU32(s genSource) uint32 { return uint32(genU64(s)) }

func genI64(s genSource) int64 {
	if s.IntN(2) == 0 {
		return -int64(genU64(s)) // with 1<<63: math.MinInt64
	}
	return int64(genU64(s))
}

func genIDs(s genSource) []blob.ID {
	switch k := s.IntN(5); k {
	case 0:
		return nil
	case 1:
		return []blob.ID{}
	default:
		ids := make([]blob.ID, k-1)
		for i := range ids {
			for j := 0; j < blob.IDSize; j += 8 {
				binary.LittleEndian.PutUint64(ids[i][j:], s.Uint64())
			}
		}
		return ids
	}
}

var allTypes = []NodeType{TypeFile, TypeDir, TypeSymlink, TypeHardlink, TypeFIFO, TypeSocket, TypeDevice}

// genNodes returns a nil, empty or short node list with every field drawn
// from hostile values: any bytes in strings and byte strings, nil and empty
// variants, extreme integers. Names may repeat and be unsorted.
func genNodes(s genSource) []Node {
	var nodes []Node
	switch k := s.IntN(10); k {
	case 0:
		return nil
	case 1:
		return []Node{}
	default:
		nodes = make([]Node, k-1)
	}
	for i := range nodes {
		n := &nodes[i]
		n.Name = genBytes(s)
		if s.IntN(3) == 0 {
			n.Type = NodeType(genString(s))
		} else {
			n.Type = allTypes[s.IntN(len(allTypes))]
		}
		n.Mode, n.UID, n.GID = genU32(s), genU32(s), genU32(s)
		n.User, n.Group = genString(s), genString(s)
		n.MtimeNs, n.Size = genI64(s), genU64(s)
		n.LinkTarget, n.LinkPath = genBytes(s), genBytes(s)
		switch k := s.IntN(5); k {
		case 0:
		case 1:
			n.Xattrs = []Xattr{}
		default:
			for range k - 1 {
				n.Xattrs = append(n.Xattrs, Xattr{Name: genString(s), Value: genBytes(s)})
			}
		}
		n.Content, n.Subtree = genIDs(s), genIDs(s)
	}
	return nodes
}

// sortedUnique returns nodes sorted by name without duplicate names, as
// EncodeTree requires; nil stays nil and empty stays empty.
func sortedUnique(nodes []Node) []Node {
	if nodes == nil {
		return nil
	}
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b Node) int { return bytes.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Node) bool { return bytes.Equal(a.Name, b.Name) })
}

func marshalTree(t testing.TB, nodes []Node) []byte {
	t.Helper()
	b, err := json.Marshal(Tree{Version: TreeVersion, Nodes: nodes})
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return b
}

func requireSameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	t.Fatalf("%s differs from json.Marshal at byte %d (lengths %d, %d)\n got: %q\nwant: %q",
		what, i, len(got), len(want), got[max(0, i-40):min(len(got), i+40)], want[max(0, i-40):min(len(want), i+40)])
}

// checkTreeEncoding compares appendTree with json.Marshal for nodes as
// they are, appended after other bytes, and EncodeTree for the same nodes
// sorted and unique.
func checkTreeEncoding(t testing.TB, nodes []Node) {
	t.Helper()
	want := marshalTree(t, nodes)
	requireSameBytes(t, "appendTree", appendTree(nil, nodes), want)
	prefix := []byte("prefix")
	got := appendTree(prefix[:len(prefix):len(prefix)], nodes)
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("appendTree lost the bytes before it: %q", got)
	}
	requireSameBytes(t, "appendTree after a prefix", got[len(prefix):], want)

	sorted := sortedUnique(nodes)
	enc, err := EncodeTree(sorted)
	if err != nil {
		t.Fatalf("EncodeTree of sorted unique names: %v", err)
	}
	requireSameBytes(t, "EncodeTree", enc, marshalTree(t, sorted)) // xattrs now sorted in place, as EncodeTree left them
}

// TestEncodeTreeMatchesJSONMarshal is the property test: random node lists
// with hostile bytes in every field encode exactly as json.Marshal does.
func TestEncodeTreeMatchesJSONMarshal(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for range 20_000 {
		checkTreeEncoding(t, genNodes(r))
	}
}

// FuzzEncodeTree builds node lists from the fuzzer's bytes (same generator
// as the property test) and compares the encoders.
func FuzzEncodeTree(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2, 0})
	f.Add([]byte("\x05\x04\x02\x00\x05\x02\x01\x03\x00\x05\x02\x05\x03\x05\x04\x05\xe2\x80\xa8<&>\x00\xff"))
	seed := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := make([]byte, 512)
		for i := range b {
			b[i] = byte(seed.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkTreeEncoding(t, genNodes(&fuzzSource{data: data}))
	})
}

// TestEncodeTreePinned pins the bytes of a tree independently of
// encoding/json, so neither encoder can drift from the stored format (a
// change here changes every tree id).
func TestEncodeTreePinned(t *testing.T) {
	t.Parallel()
	id := blob.ID{0: 0xab, 31: 0x01}
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  string
	}{
		{"nil nodes", nil, `{"version":1,"nodes":null}`},
		{"empty nodes", []Node{}, `{"version":1,"nodes":[]}`},
		{"zero node", []Node{{}}, `{"version":1,"nodes":[{"name":null,"type":"","mode":0,"uid":0,"gid":0,"mtime_ns":0}]}`},
		{"empty name and slices", []Node{{Name: []byte{}, LinkTarget: []byte{}, LinkPath: []byte{}, Xattrs: []Xattr{},
			Content: []blob.ID{}, Subtree: []blob.ID{}}},
			`{"version":1,"nodes":[{"name":"","type":"","mode":0,"uid":0,"gid":0,"mtime_ns":0}]}`},
		{"every field", []Node{{
			Name: []byte("a\xffb"), Type: TypeFile, Mode: 0o4755, UID: math.MaxUint32, GID: 7,
			User: "<a&b>\u2028\u2029\x00\b\f\n\r\t\x1f\"\\\x7f", Group: "x\xc0\xafé😀",
			MtimeNs: math.MinInt64, Size: math.MaxUint64, LinkTarget: []byte("t"), LinkPath: []byte("pa"),
			Xattrs:  []Xattr{{Name: "user.a", Value: nil}, {Name: "user.b", Value: []byte{}}, {Name: "user.c", Value: []byte{0xfb, 0xff}}},
			Content: []blob.ID{id}, Subtree: []blob.ID{{}, id},
		}}, `{"version":1,"nodes":[{"name":"Yf9i","type":"file","mode":2541,"uid":4294967295,"gid":7,` +
			`"user":"\u003ca\u0026b\u003e\u2028\u2029\u0000\b\f\n\r\t\u001f\"\\` + "\x7f" + `",` +
			`"group":"x\ufffd\ufffdé😀","mtime_ns":-9223372036854775808,"size":18446744073709551615,` +
			`"link_target":"dA==","link_path":"cGE=",` +
			`"xattrs":[{"name":"user.a","value":null},{"name":"user.b","value":""},{"name":"user.c","value":"+/8="}],` +
			`"content":["ab00000000000000000000000000000000000000000000000000000000000001"],` +
			`"subtree":["0000000000000000000000000000000000000000000000000000000000000000",` +
			`"ab00000000000000000000000000000000000000000000000000000000000001"]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeTree(tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("EncodeTree:\n got %s\nwant %s", got, tc.want)
			}
			requireSameBytes(t, "EncodeTree", got, marshalTree(t, tc.nodes))
		})
	}
}

// TestEncodeTreeRefusesUnsorted keeps EncodeTree's checks: names sorted
// and unique; xattrs are sorted by name in place.
func TestEncodeTreeRefusesUnsorted(t *testing.T) {
	t.Parallel()
	for _, names := range [][]string{{"b", "a"}, {"a", "a"}, {"a", "c", "b"}} {
		var nodes []Node
		for _, n := range names {
			nodes = append(nodes, Node{Name: []byte(n), Type: TypeFIFO})
		}
		if _, err := EncodeTree(nodes); err == nil {
			t.Errorf("EncodeTree accepted names %q", names)
		}
	}
	nodes := []Node{{Name: []byte("f"), Type: TypeFile, Xattrs: []Xattr{{Name: "user.z"}, {Name: "user.a"}}}}
	if _, err := EncodeTree(nodes); err != nil {
		t.Fatal(err)
	}
	if x := nodes[0].Xattrs; x[0].Name != "user.a" || x[1].Name != "user.z" {
		t.Errorf("xattrs not sorted: %+v", x)
	}
}

// genValidNodes returns a sorted, unique list of nodes that DecodeTree
// accepts, with valid UTF-8 strings (encoding/json decodes invalid UTF-8
// to U+FFFD, so only these survive a round trip unchanged) that still need
// escaping, and empty omitempty slices as nil (they decode as nil).
func genValidNodes(r *rand.Rand) []Node {
	str := func() string {
		var b []byte
		for range r.IntN(4) {
			b = append(b, hostilePieces[r.IntN(len(hostilePieces))]...)
		}
		return string(bytes.ToValidUTF8(b, nil))
	}
	raw := func(nonEmpty bool, forbid byte) []byte {
		b := make([]byte, r.IntN(20))
		if nonEmpty {
			b = append(b, 'x')
		}
		for i := range b {
			if b[i] = byte(r.IntN(256)); b[i] == forbid || b[i] == 0 {
				b[i] = 'x'
			}
		}
		if len(b) == 0 {
			return nil
		}
		return b
	}
	var nodes []Node
	for range r.IntN(12) {
		n := Node{Name: raw(true, '/'), Type: allTypes[r.IntN(len(allTypes))], Mode: uint32(r.IntN(010000)),
			UID: r.Uint32(), GID: r.Uint32(), User: str(), Group: str(), MtimeNs: int64(r.Uint64()), Size: r.Uint64() >> r.IntN(65)}
		if string(n.Name) == "." || string(n.Name) == ".." {
			n.Name = append(n.Name, 'x')
		}
		for range r.IntN(3) {
			x := Xattr{Name: "user." + str()}
			if r.IntN(3) > 0 {
				x.Value = append([]byte{}, raw(false, 0)...) // nil, or empty but not nil, or bytes
			}
			n.Xattrs = append(n.Xattrs, x)
		}
		switch n.Type {
		case TypeFile:
			n.Content = genIDs(r)
		case TypeDir:
			n.Subtree = genIDs(r)
		case TypeSymlink:
			n.LinkTarget = raw(true, 0)
		case TypeHardlink:
			n.LinkPath = raw(true, 0)
		}
		if len(n.Content) == 0 {
			n.Content = nil
		}
		if len(n.Subtree) == 0 {
			n.Subtree = nil
		}
		nodes = append(nodes, n)
	}
	return sortedUnique(nodes)
}

// TestEncodeTreeRoundTrip decodes what EncodeTree wrote with DecodeTree
// and gets the same nodes back, and encoding them again gives the same
// bytes.
func TestEncodeTreeRoundTrip(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for range 2_000 {
		nodes := genValidNodes(r)
		enc, err := EncodeTree(nodes)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := DecodeTree(enc)
		if err != nil {
			t.Fatalf("DecodeTree(%s): %v", enc, err)
		}
		if !reflect.DeepEqual(tr.Nodes, nodes) {
			t.Fatalf("round trip changed the nodes\n got %+v\nwant %+v\nencoding %s", tr.Nodes, nodes, enc)
		}
		again, err := EncodeTree(tr.Nodes)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding differs\n got %s\nwant %s", again, enc)
		}
	}
}

// TestTreeSizeHint checks the hint is enough for one allocation when no
// string needs escaping, even with the widest numbers, and not far above
// for the typical file nodes of the benchmark.
func TestTreeSizeHint(t *testing.T) {
	t.Parallel()
	widest := Node{Name: []byte("n"), Type: TypeFile, Mode: math.MaxUint32, UID: math.MaxUint32, GID: math.MaxUint32,
		User: "u", Group: "g", MtimeNs: math.MinInt64, Size: math.MaxUint64, LinkTarget: []byte("t"), LinkPath: []byte("p"),
		Xattrs: []Xattr{{Name: "user.a"}, {Name: "user.b", Value: []byte("v")}}, Content: genIDs(rand.New(rand.NewPCG(1, 1))),
		Subtree: []blob.ID{{}}}
	for _, nodes := range [][]Node{nil, {}, {{}}, {widest}, benchNodes(1000)} {
		enc, err := EncodeTree(nodes)
		if err != nil {
			t.Fatal(err)
		}
		if hint := treeSizeHint(nodes); hint < len(enc) || len(nodes) > 100 && hint > len(enc)+len(enc)/5 {
			t.Errorf("%d nodes: hint %d for %d bytes", len(nodes), hint, len(enc))
		}
	}
}
