package snapshot

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"lifeboat/internal/seedtest"
	"lifeboat/snapshot/internal/race"
)

// The canonical tree parser must decode exactly as encoding/json does:
// decodeTreeJSON (DecodeTree before the parser) is the reference here.

// checkSameDecode checks DecodeTree against decodeTreeJSON on b: both
// refuse it with the same error, or both return equal trees; and when the
// canonical parser takes b, encoding/json decodes b without error to an
// equal tree (before DecodeTree's checks). DecodeTree gets its own copy of
// b, overwritten after the call, so a tree that aliases its input shows.
// It reports whether the canonical parser took b.
func checkSameDecode(t testing.TB, b []byte) (canonical bool) {
	t.Helper()
	want, wantErr := decodeTreeJSON(b)
	in := bytes.Clone(b)
	got, gotErr := DecodeTree(in)
	for i := range in {
		in[i] = '#'
	}
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("input %q\nDecodeTree error: %v\nencoding/json error: %v", b, gotErr, wantErr)
	case gotErr != nil && gotErr.Error() != wantErr.Error():
		t.Fatalf("input %q: errors differ\nDecodeTree:    %v\nencoding/json: %v", b, gotErr, wantErr)
	case gotErr != nil && got != nil:
		t.Fatalf("input %q: DecodeTree returned a tree with its error %v", b, gotErr)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("input %q: trees differ\nDecodeTree:    %#v\nencoding/json: %#v", b, got, want)
	}

	fast, ok := decodeCanonicalTree(b)
	if !ok {
		return false
	}
	ref, err := unmarshalTreeJSON(b)
	if err != nil {
		t.Fatalf("input %q: the canonical parser took what encoding/json refuses: %v", b, err)
	}
	if !reflect.DeepEqual(fast, ref) {
		t.Fatalf("input %q: canonical parser and encoding/json differ\nparser:        %#v\nencoding/json: %#v", b, fast, ref)
	}
	return true
}

// TestDecodeTreeCanonicalProperty is the property test: the canonical
// parser takes every encoding appendTree writes, of random node lists with
// hostile bytes in every field (as TestEncodeTreeMatchesJSONMarshal), and
// decodes it exactly as encoding/json; valid trees round-trip through
// DecodeTree.
func TestDecodeTreeCanonicalProperty(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for i := range 20_000 {
		nodes := genNodes(r)
		if i%2 == 0 {
			nodes = sortedUnique(nodes)
		}
		if !checkSameDecode(t, appendTree(nil, nodes)) {
			t.Fatalf("the canonical parser refused appendTree's encoding %q", appendTree(nil, nodes))
		}
	}
	for range 2_000 {
		nodes := genValidNodes(r)
		enc, err := EncodeTree(nodes)
		if err != nil {
			t.Fatal(err)
		}
		if !checkSameDecode(t, enc) {
			t.Fatalf("the canonical parser refused %q", enc)
		}
		tr, err := DecodeTree(enc)
		if err != nil {
			t.Fatalf("DecodeTree(%q): %v", enc, err)
		}
		if !reflect.DeepEqual(tr.Nodes, nodes) {
			t.Fatalf("round trip changed the nodes\n got %+v\nwant %+v", tr.Nodes, nodes)
		}
	}
}

// TestDecodeTreeLarge covers trees of many nodes: the benchmark's 1,000
// file entries, exactly MaxNodesPerBlob, and one more, which the parser
// leaves to encoding/json so that the error is the same.
func TestDecodeTreeLarge(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1000, MaxNodesPerBlob, MaxNodesPerBlob + 1} {
		enc := appendTree(nil, benchNodes(n))
		if got := checkSameDecode(t, enc); got != (n <= MaxNodesPerBlob) {
			t.Errorf("%d nodes: canonical parser took it: %v", n, got)
		}
		if _, err := DecodeTree(enc); (err == nil) != (n <= MaxNodesPerBlob) {
			t.Errorf("%d nodes: DecodeTree: %v", n, err)
		}
	}
}

// treeOf wraps one node's JSON fields in a tree blob.
func treeOf(fields string) string { return `{"version":1,"nodes":[{` + fields + `}]}` }

// fileFields are a valid file node's fields; fileWith replaces one of them.
const fileFields = `"name":"YQ==","type":"file","mode":420,"uid":1000,"gid":1000,"user":"u","mtime_ns":5,"size":3`

func fileWith(old, new string) string {
	if !strings.Contains(fileFields, old) {
		panic("no " + old + " in the test node")
	}
	return treeOf(strings.Replace(fileFields, old, new, 1))
}

const hexID = "ab00000000000000000000000000000000000000000000000000000000000001"

// TestDecodeTreeEdgeCases decodes inputs at each edge of the canonical
// form, canonical or not, and checks which the parser takes (the rest go
// to encoding/json) and that DecodeTree agrees with encoding/json on all.
func TestDecodeTreeEdgeCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		in        string
		canonical bool // the canonical parser takes it
	}{
		{"nil nodes", `{"version":1,"nodes":null}`, true},
		{"empty nodes", `{"version":1,"nodes":[]}`, true},
		{"valid file", treeOf(fileFields), true},
		{"trailing bytes", `{"version":1,"nodes":null}x`, false},
		{"trailing space", `{"version":1,"nodes":[]} `, false},
		{"leading space", ` {"version":1,"nodes":[]}`, false},
		{"space inside", `{"version": 1,"nodes":[]}`, false},
		{"version 2", `{"version":2,"nodes":[]}`, false},
		{"no nodes key", `{"version":1}`, false},
		{"keys swapped", `{"nodes":[],"version":1}`, false},
		{"key case", `{"Version":1,"nodes":[]}`, false},
		{"duplicate key", fileWith(`"uid":1000`, `"uid":1000,"uid":7`), false},
		{"unknown key", fileWith(`"size":3`, `"size":3,"extra":1`), false},
		{"field order", fileWith(`"mode":420,"uid":1000`, `"uid":1000,"mode":420`), false},
		{"null node", `{"version":1,"nodes":[null]}`, false},
		{"truncated", treeOf(fileFields)[:40], false},

		{"mode max uint32", fileWith(`"mode":420`, `"mode":4294967295`), true},
		{"mode over uint32", fileWith(`"mode":420`, `"mode":4294967296`), false},
		{"uid far over uint32", fileWith(`"uid":1000`, `"uid":99999999999999999999999`), false},
		{"mode leading zero", fileWith(`"mode":420`, `"mode":0420`), false},
		{"mode zero", fileWith(`"mode":420`, `"mode":0`), true},
		{"mode negative", fileWith(`"mode":420`, `"mode":-1`), false},
		{"mode fraction", fileWith(`"mode":420`, `"mode":420.0`), false},
		{"mode exponent", fileWith(`"mode":420`, `"mode":4e2`), false},
		{"mode string", fileWith(`"mode":420`, `"mode":"420"`), false},
		{"mode null", fileWith(`"mode":420`, `"mode":null`), false},
		{"mtime min int64", fileWith(`"mtime_ns":5`, `"mtime_ns":-9223372036854775808`), true},
		{"mtime under int64", fileWith(`"mtime_ns":5`, `"mtime_ns":-9223372036854775809`), false},
		{"mtime max int64", fileWith(`"mtime_ns":5`, `"mtime_ns":9223372036854775807`), true},
		{"mtime over int64", fileWith(`"mtime_ns":5`, `"mtime_ns":9223372036854775808`), false},
		{"mtime minus zero", fileWith(`"mtime_ns":5`, `"mtime_ns":-0`), true},
		{"mtime minus alone", fileWith(`"mtime_ns":5`, `"mtime_ns":-`), false},
		{"mtime minus leading zero", fileWith(`"mtime_ns":5`, `"mtime_ns":-01`), false},
		{"size max uint64", fileWith(`"size":3`, `"size":18446744073709551615`), true},
		{"size over uint64", fileWith(`"size":3`, `"size":18446744073709551616`), false},
		{"size zero present", fileWith(`"size":3`, `"size":0`), true},
		{"size negative", fileWith(`"size":3`, `"size":-3`), false},

		{"name null", fileWith(`"name":"YQ=="`, `"name":null`), true},
		{"name empty", fileWith(`"name":"YQ=="`, `"name":""`), true},
		{"name unpadded", fileWith(`"name":"YQ=="`, `"name":"YQ"`), false},
		{"name nonzero pad bits", fileWith(`"name":"YQ=="`, `"name":"YR=="`), true},
		{"name bad base64", fileWith(`"name":"YQ=="`, `"name":"Y*=="`), false},
		{"name escaped slash", fileWith(`"name":"YQ=="`, `"name":"\/w=="`), false},
		{"name escaped newline", fileWith(`"name":"YQ=="`, `"name":"YQ\n=="`), false},
		{"name raw newline", fileWith(`"name":"YQ=="`, "\"name\":\"YQ\n==\""), false},
		{"name dot", fileWith(`"name":"YQ=="`, `"name":"Lg=="`), true},
		{"name with slash", fileWith(`"name":"YQ=="`, `"name":"YS9i"`), true},
		{"name number", fileWith(`"name":"YQ=="`, `"name":1`), false},
		{"name unterminated", `{"version":1,"nodes":[{"name":"YQ==`, false},

		{"user html escapes", fileWith(`"user":"u"`, `"user":"\u003ca\u0026b\u003e\u2028\u2029"`), true},
		{"user named escapes", fileWith(`"user":"u"`, `"user":"\"\\\/\b\f\n\r\t"`), true},
		{"user uppercase escape", fileWith(`"user":"u"`, `"user":"\u00E9\u00e9"`), true},
		{"user surrogate pair", fileWith(`"user":"u"`, `"user":"\ud83d\ude00"`), true},
		{"user lone high surrogate", fileWith(`"user":"u"`, `"user":"\ud83d"`), true},
		{"user high then letter", fileWith(`"user":"u"`, `"user":"\ud83dx"`), true},
		{"user high then non-low", fileWith(`"user":"u"`, `"user":"\ud83d\u0041"`), true},
		{"user two highs", fileWith(`"user":"u"`, `"user":"\ud83d\ud83d\ude00"`), true},
		{"user lone low", fileWith(`"user":"u"`, `"user":"\ude00"`), true},
		{"user high then bad escape", fileWith(`"user":"u"`, `"user":"\ud83d\u00zz"`), false},
		{"user short escape", fileWith(`"user":"u"`, `"user":"\u12"`), false},
		{"user replacement char", fileWith(`"user":"u"`, `"user":"\ufffd"`), true},
		{"user raw invalid utf8", fileWith(`"user":"u"`, "\"user\":\"a\xffb\xc0\xaf\xed\xa0\x80\""), true},
		{"user raw utf8", fileWith(`"user":"u"`, `"user":"é😀"`), true},
		{"user raw control", fileWith(`"user":"u"`, "\"user\":\"a\x01\""), false},
		{"user raw DEL", fileWith(`"user":"u"`, "\"user\":\"a\x7f\""), true},
		{"user quote escape", fileWith(`"user":"u"`, `"user":"\'"`), false},
		{"user bad escape", fileWith(`"user":"u"`, `"user":"\x41"`), false},
		{"user empty", fileWith(`"user":"u"`, `"user":""`), true},
		{"user null", fileWith(`"user":"u"`, `"user":null`), false},
		{"group after user", fileWith(`"user":"u"`, `"user":"u","group":"g"`), true},
		{"type unknown", fileWith(`"type":"file"`, `"type":"weird\u0000"`), true},
		{"type empty", fileWith(`"type":"file"`, `"type":""`), true},
		{"type escaped", fileWith(`"type":"file"`, `"type":"\u0066ile"`), true},

		{"link target on file", fileWith(`"size":3`, `"size":3,"link_target":"dA=="`), true},
		{"empty link target on file", fileWith(`"size":3`, `"size":3,"link_target":""`), true},
		{"null link target on file", fileWith(`"size":3`, `"size":3,"link_target":null`), true},
		{"link path null", fileWith(`"size":3`, `"size":3,"link_path":null`), true},
		{"xattrs null", fileWith(`"size":3`, `"size":3,"xattrs":null`), true},
		{"xattrs empty", fileWith(`"size":3`, `"size":3,"xattrs":[]`), true},
		{"xattr values", fileWith(`"size":3`,
			`"size":3,"xattrs":[{"name":"user.a","value":null},{"name":"user.b","value":""},{"name":"user.c","value":"+/8="}]`), true},
		{"xattr keys swapped", fileWith(`"size":3`, `"size":3,"xattrs":[{"value":null,"name":"user.a"}]`), false},
		{"xattr no value", fileWith(`"size":3`, `"size":3,"xattrs":[{"name":"user.a"}]`), false},
		{"xattrs trailing comma", fileWith(`"size":3`, `"size":3,"xattrs":[{"name":"user.a","value":null},]`), false},
		{"content", fileWith(`"size":3`, `"size":3,"content":["`+hexID+`","`+hexID+`"]`), true},
		{"content empty", fileWith(`"size":3`, `"size":3,"content":[]`), true},
		{"content null", fileWith(`"size":3`, `"size":3,"content":null`), true},
		{"content uppercase hex", fileWith(`"size":3`, `"size":3,"content":["`+strings.ToUpper(hexID)+`"]`), true},
		{"content short id", fileWith(`"size":3`, `"size":3,"content":["`+hexID[1:]+`"]`), false},
		{"content long id", fileWith(`"size":3`, `"size":3,"content":["`+hexID+`0"]`), false},
		{"content bad hex", fileWith(`"size":3`, `"size":3,"content":["`+hexID[:63]+`g"]`), false},
		{"content escaped hex", fileWith(`"size":3`, `"size":3,"content":["\u0061`+hexID[1:]+`"]`), false},
		{"content null id", fileWith(`"size":3`, `"size":3,"content":[null]`), false},
		{"subtree on file", fileWith(`"size":3`, `"size":3,"subtree":["`+hexID+`"]`), true},
		{"empty subtree on file", fileWith(`"size":3`, `"size":3,"subtree":[]`), true},
		{"content then subtree swapped", fileWith(`"size":3`, `"size":3,"subtree":[],"content":[]`), false},
		{"two nodes unsorted", `{"version":1,"nodes":[{"name":"Yg==","type":"fifo","mode":0,"uid":0,"gid":0,"mtime_ns":0},` +
			`{"name":"YQ==","type":"fifo","mode":0,"uid":0,"gid":0,"mtime_ns":0}]}`, true},
		{"two nodes same user", `{"version":1,"nodes":[{"name":"YQ==","type":"fifo","mode":0,"uid":0,"gid":0,"user":"u","group":"g","mtime_ns":0},` +
			`{"name":"Yg==","type":"fifo","mode":0,"uid":0,"gid":0,"user":"u","group":"h","mtime_ns":0}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkSameDecode(t, []byte(tc.in)); got != tc.canonical {
				t.Errorf("canonical parser took %q: %v, want %v", tc.in, got, tc.canonical)
			}
		})
	}
}

// mutate changes enc in 1 to 3 places: a flipped bit, a byte replaced or
// inserted (drawn from bytes that matter to the grammar), a run deleted
// or repeated.
func mutate(r *rand.Rand, enc []byte) []byte {
	const special = `"\{}[],:0123456789-+.eEnulabfrtuUABCDEFabcdef/=` + "\x00\x01\n\r\x7f\x80\xff"
	b := bytes.Clone(enc)
	for range 1 + r.IntN(3) {
		if len(b) == 0 {
			return append(b, special[r.IntN(len(special))])
		}
		i := r.IntN(len(b))
		switch r.IntN(5) {
		case 0:
			b[i] ^= 1 << r.IntN(8)
		case 1:
			b[i] = special[r.IntN(len(special))]
		case 2:
			b = append(b[:i], append([]byte{special[r.IntN(len(special))]}, b[i:]...)...)
		case 3:
			b = append(b[:i], b[min(len(b), i+1+r.IntN(8)):]...)
		default:
			j := min(len(b), i+1+r.IntN(8))
			b = append(b[:j], append(bytes.Clone(b[i:j]), b[j:]...)...)
		}
	}
	return b
}

// TestDecodeTreeMutations decodes valid and hostile encodings with bytes
// flipped, inserted, deleted and repeated: DecodeTree and encoding/json
// agree on every one, and the canonical parser decodes the ones it takes
// exactly as encoding/json.
func TestDecodeTreeMutations(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	var canonical, accepted int
	const rounds = 30_000
	for i := range rounds {
		var enc []byte
		if i%2 == 0 {
			enc = appendTree(nil, genValidNodes(r))
		} else {
			enc = appendTree(nil, genNodes(r))
		}
		m := mutate(r, enc)
		if checkSameDecode(t, m) {
			canonical++
		}
		if _, err := DecodeTree(m); err == nil {
			accepted++
		}
	}
	t.Logf("%d mutated encodings: %d taken by the canonical parser, %d accepted by DecodeTree", rounds, canonical, accepted)
	if canonical == 0 || accepted == 0 {
		t.Errorf("the mutations never reach the parser (%d) or never decode (%d)", canonical, accepted)
	}
}

// FuzzDecodeTree checks DecodeTree against encoding/json on any input.
func FuzzDecodeTree(f *testing.F) {
	f.Add([]byte(`{"version":1,"nodes":null}`))
	f.Add([]byte(`{"version":1,"nodes":[]}`))
	f.Add([]byte(treeOf(fileFields)))
	f.Add([]byte(fileWith(`"user":"u"`, `"user":"\ud83d\ude00\u003c\ufffd\n"`)))
	f.Add([]byte(fileWith(`"size":3`, `"size":3,"xattrs":[{"name":"user.a","value":null},{"name":"user.b","value":""}],"content":["`+hexID+`"]`)))
	f.Add([]byte(`{"version":1,"nodes":[{"name":"ZA==","type":"dir","mode":493,"uid":0,"gid":0,"mtime_ns":-1,"subtree":["` + hexID + `"]},` +
		`{"name":"bA==","type":"symlink","mode":511,"uid":0,"gid":0,"mtime_ns":0,"link_target":"dA=="},` +
		`{"name":"bQ==","type":"hardlink","mode":0,"uid":0,"gid":0,"mtime_ns":0,"link_path":"cA=="}]}`))
	r := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		f.Add(appendTree(nil, genNodes(r)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSameDecode(t, b)
	})
}

// TestDecodeTreeAllocs checks the parser allocates per tree, not per
// node: the tree, its nodes, and one buffer each for []byte fields,
// strings and ids.
func TestDecodeTreeAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop entries at random")
	}
	nodes := benchNodes(1000)
	for i := range nodes {
		nodes[i].User, nodes[i].Group = "alice", "staff" // the same for every node: stored once
	}
	enc := appendTree(nil, nodes)
	if _, err := DecodeTree(enc); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = DecodeTree(enc) }); n > 5 {
		t.Errorf("DecodeTree of %d nodes: %.0f allocations, want at most 5", len(nodes), n)
	}
}

// allocatedBy returns the bytes fn allocates per call, averaged over runs.
// It reads the process's allocation counter, so a test that calls it must
// not run in parallel: other tests' allocations would be counted too.
func allocatedBy(runs int, fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestDecodeTreeHostileMemory decodes blobs built to make the parser
// allocate the most per input byte (the smallest nodes, xattrs, ids and
// strings it takes): at most 4 times the input's size with its scratch
// space grown (pooled), at most 10 times when that is allocated anew (the
// pool is emptied by GCs), and less than encoding/json in both cases.
func TestDecodeTreeHostileMemory(t *testing.T) {
	const minNode = `{"name":"","type":"","mode":0,"uid":0,"gid":0,"mtime_ns":0}`
	blobs := map[string]string{
		"smallest nodes": strings.Repeat(minNode+",", MaxNodesPerBlob-1) + minNode,
		"xattrs":         `{"name":"","type":"","mode":0,"uid":0,"gid":0,"mtime_ns":0,"xattrs":[` + strings.Repeat(`{"name":"","value":""},`, 1e5) + `{"name":"","value":""}]}`,
		"ids":            `{"name":"","type":"","mode":0,"uid":0,"gid":0,"mtime_ns":0,"content":[` + strings.Repeat(`"`+hexID+`",`, 1e4) + `"` + hexID + `"]}`,
		"strings":        `{"name":"","type":"","mode":0,"uid":0,"gid":0,"user":"` + strings.Repeat("a", 1e6) + `","mtime_ns":0}`,
		"unknown types":  strings.Repeat(`{"name":"","type":"\u0000","mode":0,"uid":0,"gid":0,"mtime_ns":0},`, 1000) + minNode,
	}
	for name, nodes := range blobs {
		b := []byte(`{"version":1,"nodes":[` + nodes + `]}`)
		if _, ok := decodeCanonicalTree(b); !ok {
			t.Fatalf("%s: the canonical parser refused it", name)
		}
		// Measured on parsers of the test's own, not through the pool
		// (the race detector drops pooled values at random), so every
		// run measures the same: one whose scratch space is already
		// grown, as in steady use, and fresh ones, as after a GC.
		warm := new(treeParser)
		warm.decode(b)
		pooled := allocatedBy(5, func() { _, _ = warm.decode(b) })
		fresh := allocatedBy(5, func() { _, _ = new(treeParser).decode(b) })
		json := allocatedBy(5, func() { _, _ = unmarshalTreeJSON(b) })
		ratio := func(n uint64) float64 { return float64(n) / float64(len(b)) }
		t.Logf("%s: %d bytes in; allocated %d bytes (%.2fx) with scratch space, %d (%.2fx) without; encoding/json %d (%.2fx)",
			name, len(b), pooled, ratio(pooled), fresh, ratio(fresh), json, ratio(json))
		if pooled > 4*uint64(len(b))+64<<10 {
			t.Errorf("%s: %d bytes allocated for %d bytes of input with scratch space, want at most 4x", name, pooled, len(b))
		}
		if fresh > 10*uint64(len(b))+64<<10 || fresh > json {
			t.Errorf("%s: %d bytes allocated for %d bytes of input without scratch space, want at most 10x and below encoding/json's %d", name, fresh, len(b), json)
		}
	}
}
