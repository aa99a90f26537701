package index_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for i := range 200 {
		tier := blob.Tiers[r.IntN(len(blob.Tiers))]
		o := randObject(r, tier, r.IntN(8), r.IntN(40))
		b := o.Encode()
		got, err := index.Decode(b)
		if err != nil {
			t.Fatalf("object %d: Decode(Encode(o)): %v", i, err)
		}
		if !equalObjects(got, o) {
			t.Fatalf("object %d: round trip changed the object:\n got %+v\nwant %+v", i, got, o)
		}
		if got.Entries() != o.Entries() {
			t.Fatalf("object %d: Entries() = %d, want %d", i, got.Entries(), o.Entries())
		}
		if !bytes.Equal(got.Encode(), b) {
			t.Fatalf("object %d: encoding is not canonical", i)
		}
	}
}

func TestEncodeDecodeEdgeCases(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	full := randPack(r, 3)
	cases := map[string]*index.Object{
		"empty":             {Tier: blob.Workspace},
		"empty sensitive":   {Tier: blob.Sensitive},
		"only supersedes":   {Tier: blob.Workspace, Supersedes: []blob.ID{randID(r), randID(r)}},
		"pack with no blob": {Tier: blob.Sensitive, Packs: []index.PackInfo{{ID: randID(r), Size: 100}}},
		"many packs":        {Tier: blob.Workspace, Packs: []index.PackInfo{randPack(r, 1), full, randPack(r, 0), randPack(r, 20)}},
		"smallest blob": {Tier: blob.Workspace, Packs: []index.PackInfo{{ID: randID(r), Size: crypt.Overhead,
			Entries: []pack.Entry{{Type: blob.Tree, Length: crypt.Overhead}}}}},
		"largest plain": {Tier: blob.Workspace, Packs: []index.PackInfo{{ID: randID(r), Size: 1 << 20,
			Entries: []pack.Entry{{Type: blob.Data, Flags: pack.FlagZstd, Length: 1 << 20, PlainLen: pack.MaxBlobSize}}}}},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := o.Encode()
			got, err := index.Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !equalObjects(got, o) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, o)
			}
		})
	}
	// The empty object's layout is pinned: magic, version, tier, two zero counts.
	want := []byte{'L', 'B', 'I', 'X', 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := (&index.Object{Tier: blob.Workspace}).Encode(); !bytes.Equal(got, want) {
		t.Fatalf("empty object encodes as %x, want %x", got, want)
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	m := crypt.NewMasterKeys()
	for _, tier := range blob.Tiers {
		k, err := m.Tier(tier)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []*index.Object{{Tier: tier}, randObject(r, tier, 5, 20)} {
			sealed, err := index.Seal(k, o)
			if err != nil {
				t.Fatalf("Seal %s: %v", tier, err)
			}
			if bytes.Contains(sealed, o.Encode()[6:]) && o.Entries() > 0 {
				t.Fatalf("sealed object contains its plaintext")
			}
			got, err := index.Open(m, sealed)
			if err != nil {
				t.Fatalf("Open %s: %v", tier, err)
			}
			if !equalObjects(got, o) {
				t.Fatalf("Seal/Open changed the object:\n got %+v\nwant %+v", got, o)
			}
		}
	}
}

func TestOpenLockedTier(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	m := crypt.NewMasterKeys()
	ws, err := m.Restrict([]blob.Tier{blob.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	sk, _ := m.Tier(blob.Sensitive)
	sealed, err := index.Seal(sk, randObject(r, blob.Sensitive, 2, 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Open(ws, sealed); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("Open of a sensitive object with workspace-only keys: %v, want ErrTierLocked", err)
	}
	// The workspace tier still opens with the restricted keys.
	wk, _ := m.Tier(blob.Workspace)
	o := randObject(r, blob.Workspace, 2, 5)
	sealed, err = index.Seal(wk, o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := index.Open(ws, sealed)
	if err != nil || !equalObjects(got, o) {
		t.Fatalf("Open of a workspace object with workspace-only keys: %v", err)
	}
}

func TestSealWrongTierKeys(t *testing.T) {
	t.Parallel()
	m := crypt.NewMasterKeys()
	wk, _ := m.Tier(blob.Workspace)
	sk, _ := m.Tier(blob.Sensitive)
	if _, err := index.Seal(wk, &index.Object{Tier: blob.Sensitive}); err == nil {
		t.Fatal("sealing a sensitive object with workspace keys succeeded")
	}
	if _, err := index.Seal(sk, &index.Object{Tier: blob.Workspace}); err == nil {
		t.Fatal("sealing a workspace object with sensitive keys succeeded")
	}
	if _, err := index.Seal(wk, &index.Object{Tier: 0}); err == nil {
		t.Fatal("sealing an object of tier 0 succeeded")
	}
}

func TestOpenRefusesBadObjects(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	m := crypt.NewMasterKeys()
	wk, _ := m.Tier(blob.Workspace)
	sk, _ := m.Tier(blob.Sensitive)
	o := randObject(r, blob.Workspace, 3, 10)
	sealed, err := index.Seal(wk, o)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("other repository keys", func(t *testing.T) {
		t.Parallel()
		if _, err := index.Open(crypt.NewMasterKeys(), sealed); !errors.Is(err, crypt.ErrAuth) {
			t.Fatalf("got %v, want ErrAuth", err)
		}
	})
	t.Run("flipped bit", func(t *testing.T) {
		t.Parallel()
		for _, i := range []int{crypt.ObjectHeaderSize, crypt.ObjectHeaderSize + 30, len(sealed) - 1} {
			bad := bytes.Clone(sealed)
			bad[i] ^= 1
			if _, err := index.Open(m, bad); !errors.Is(err, crypt.ErrAuth) {
				t.Fatalf("flip at %d: got %v, want ErrAuth", i, err)
			}
		}
	})
	t.Run("header relabelled to the other tier", func(t *testing.T) {
		t.Parallel()
		bad := bytes.Clone(sealed)
		bad[4] = byte(blob.Sensitive)
		if _, err := index.Open(m, bad); err == nil {
			t.Fatal("relabelled object opened")
		}
	})
	t.Run("truncated", func(t *testing.T) {
		t.Parallel()
		for n := 0; n < len(sealed); n += 1 + n/4 {
			if _, err := index.Open(m, sealed[:n]); err == nil {
				t.Fatalf("object truncated to %d bytes opened", n)
			}
		}
	})
	t.Run("other kind", func(t *testing.T) {
		t.Parallel()
		snap := crypt.SealObject(wk, crypt.KindSnapshot, o.Encode())
		if _, err := index.Open(m, snap); err == nil {
			t.Fatal("a snapshot object opened as an index object")
		}
	})
	t.Run("plaintext tier differs from sealed tier", func(t *testing.T) {
		t.Parallel()
		bad := crypt.SealObject(sk, crypt.KindIndex, o.Encode())
		if _, err := index.Open(m, bad); !errors.Is(err, index.ErrFormat) {
			t.Fatalf("got %v, want ErrFormat", err)
		}
	})
	t.Run("sealed garbage", func(t *testing.T) {
		t.Parallel()
		bad := crypt.SealObject(wk, crypt.KindIndex, []byte("not an index object"))
		if _, err := index.Open(m, bad); !errors.Is(err, index.ErrFormat) {
			t.Fatalf("got %v, want ErrFormat", err)
		}
	})
}

// sampleObject is a small object with every section populated.
func sampleObject() *index.Object {
	return &index.Object{
		Tier:       blob.Workspace,
		Supersedes: []blob.ID{{1}, {2}},
		Packs: []index.PackInfo{
			{ID: blob.ID{0xa}, Size: 1000, Entries: []pack.Entry{
				{Type: blob.Data, ID: blob.ID{0xb}, Offset: 0, Length: 100, PlainLen: 60},
				{Type: blob.Tree, Flags: pack.FlagZstd, ID: blob.ID{0xc}, Offset: 100, Length: 200, PlainLen: 5000},
			}},
			{ID: blob.ID{0xd}, Size: 50},
		},
	}
}

func mustDecodeErr(t *testing.T, what string, b []byte) {
	t.Helper()
	o, err := index.Decode(b)
	if !errors.Is(err, index.ErrFormat) {
		t.Fatalf("%s: Decode = %+v, %v; want ErrFormat", what, o, err)
	}
	if o != nil {
		t.Fatalf("%s: Decode returned an object with its error", what)
	}
}

func TestDecodeTruncated(t *testing.T) {
	t.Parallel()
	b := sampleObject().Encode()
	for n := range len(b) {
		mustDecodeErr(t, "truncated", b[:n])
	}
}

func TestDecodeTrailingBytes(t *testing.T) {
	t.Parallel()
	for _, o := range []*index.Object{{Tier: blob.Workspace}, sampleObject()} {
		b := o.Encode()
		for _, extra := range [][]byte{{0}, {1, 2, 3}, make([]byte, pack.EntrySize)} {
			mustDecodeErr(t, "trailing bytes", append(bytes.Clone(b), extra...))
		}
	}
}

func TestDecodeBadHeader(t *testing.T) {
	t.Parallel()
	good := sampleObject().Encode()
	edit := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	mustDecodeErr(t, "magic", edit(0, 'X'))
	mustDecodeErr(t, "magic", edit(3, 'x'))
	mustDecodeErr(t, "version 0", edit(4, 0))
	mustDecodeErr(t, "version 2", edit(4, 2))
	for _, tier := range []byte{0, 3, 255} {
		mustDecodeErr(t, "tier", edit(5, tier))
	}
	mustDecodeErr(t, "nil", nil)
}

// allocated returns how many bytes fn allocates. It reads the process's
// allocation counter, so a test that calls it must not run in parallel:
// other tests' allocations would be counted too.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecodeLyingCounts(t *testing.T) {
	o := sampleObject()
	good := o.Encode()
	// Offsets of the counts in the sample's encoding.
	const supersedesAt = 6
	packsAt := supersedesAt + 4 + len(o.Supersedes)*blob.IDSize
	entries0At := packsAt + 4 + blob.IDSize + 4
	entries1At := entries0At + 4 + len(o.Packs[0].Entries)*pack.EntrySize + blob.IDSize + 4
	if got := binary.LittleEndian.Uint32(good[entries1At:]); got != 0 {
		t.Fatalf("test layout is off: second pack's entry count reads %d", got)
	}
	set := func(b []byte, at int, v uint32) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint32(b[at:], v)
		return b
	}
	// A large buffer, so a count that is only a little too big still
	// would allocate a lot if the decoder trusted it.
	padded := append(bytes.Clone(good[:entries1At+4]), make([]byte, 1<<20)...)
	cases := map[string][]byte{
		"supersedes max":      set(good, supersedesAt, 0xFFFFFFFF),
		"supersedes +1":       set(good, supersedesAt, uint32(len(o.Supersedes)+1)),
		"packs max":           set(good, packsAt, 0xFFFFFFFF),
		"packs +1":            set(good, packsAt, uint32(len(o.Packs)+1)),
		"packs -1":            set(good, packsAt, uint32(len(o.Packs)-1)),
		"entries max":         set(good, entries0At, 0xFFFFFFFF),
		"entries +1":          set(good, entries0At, uint32(len(o.Packs[0].Entries)+1)),
		"last pack max":       set(good, entries1At, 0xFFFFFFFF),
		"padded entries max":  set(padded, entries1At, 0xFFFFFFFF),
		"padded entries fits": set(padded, entries1At, (1<<20)/pack.EntrySize+1),
		"padded packs max":    set(padded, packsAt, 0xFFFFFFFF),
		"padded superse max":  set(padded, supersedesAt, 0xFFFFFFFF),
	}
	for name, b := range cases {
		var err error
		n := allocated(func() { _, err = index.Decode(b) })
		if !errors.Is(err, index.ErrFormat) {
			t.Errorf("%s: Decode: %v, want ErrFormat", name, err)
		}
		// Allow a generous constant; a trusted lying count costs gigabytes.
		if limit := uint64(4*len(b) + 64<<10); n > limit {
			t.Errorf("%s: Decode of %d bytes allocated %d bytes (limit %d)", name, len(b), n, limit)
		}
	}
}

func TestDecodeBadEntries(t *testing.T) {
	t.Parallel()
	o := sampleObject()
	good := o.Encode()
	packsAt := 6 + 4 + len(o.Supersedes)*blob.IDSize
	e0 := packsAt + 4 + blob.IDSize + 4 + 4 // first entry of the first pack
	sizeAt := packsAt + 4 + blob.IDSize
	edit := func(at int, v []byte) []byte {
		b := bytes.Clone(good)
		copy(b[at:], v)
		return b
	}
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	// Entry layout: type, flags, id, offset, length, plain length.
	const typeAt, flagsAt, offAt, lenAt, plainAt = 0, 1, 34, 38, 42
	e1 := e0 + pack.EntrySize // the compressed second entry
	cases := map[string][]byte{
		"type 0":                  edit(e0+typeAt, []byte{0}),
		"type 3":                  edit(e0+typeAt, []byte{3}),
		"unknown flag":            edit(e0+flagsAt, []byte{2}),
		"all flags":               edit(e1+flagsAt, []byte{0xff}),
		"length below overhead":   edit(e0+lenAt, u32(crypt.Overhead-1)),
		"zero length":             edit(e1+lenAt, u32(0)),
		"past pack end":           edit(e1+offAt, u32(900)),
		"offset overflow":         edit(e1+offAt, u32(0xFFFFFFFF)),
		"length overflow":         edit(e1+lenAt, u32(0xFFFFFFFF)),
		"pack smaller than blobs": edit(sizeAt, u32(299)),
		"plain above max":         edit(e1+plainAt, u32(pack.MaxBlobSize+1)),
		"uncompressed plain len":  edit(e0+plainAt, u32(61)),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("Decode panicked: %v", p)
				}
			}()
			mustDecodeErr(t, name, b)
		})
	}
	// The unedited sample is valid, so each case fails for its own edit.
	if _, err := index.Decode(good); err != nil {
		t.Fatalf("sample does not decode: %v", err)
	}
}
