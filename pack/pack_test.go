package pack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/seedtest"
)

// checkPack verifies p with Verify and ReadHeader and opens every blob.
func checkPack(t *testing.T, p testPack, k *crypt.TierKeys) {
	t.Helper()
	if p.id != blob.ID(blake3.Sum256(p.data)) {
		t.Fatal("pack id is not the BLAKE3 of its bytes")
	}
	if int64(len(p.data)) != padme(p.unpad) {
		t.Fatalf("pack is %d bytes, want padme(%d) = %d", len(p.data), p.unpad, padme(p.unpad))
	}
	tr, entries, err := Verify(p.data, p.id, ring(k))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if tr.Tier != k.Tier || !slices.Equal(entries, p.entries) {
		t.Fatalf("Verify returned tier %s and %d entries, want %s and %d", tr.Tier, len(entries), k.Tier, len(p.entries))
	}
	l := &loader{data: p.data}
	tr2, entries2, err := ReadHeader(context.Background(), int64(len(p.data)), l.load, bothTiers)
	if err != nil {
		t.Fatalf("ReadHeader: %v", err)
	}
	if tr2 != tr || !slices.Equal(entries2, p.entries) {
		t.Fatal("ReadHeader disagrees with Finish")
	}
	// The plaintext header is padded to a multiple of 4 KiB.
	blobEnd := int64(len(p.data)) - TrailerSize - int64(tr.HeaderLen)
	plain, err := k.Open(nil, p.data[blobEnd:len(p.data)-TrailerSize], headerAAD(k.Tier))
	if err != nil {
		t.Fatal(err)
	}
	if len(plain)%4096 != 0 || len(plain) == 0 {
		t.Fatalf("plaintext header is %d bytes, not a multiple of 4096", len(plain))
	}
	// Blobs lie back to back from offset 0, in the order they were added.
	off := uint32(0)
	for _, e := range p.entries {
		if e.Offset != off {
			t.Fatalf("blob %s at %d, want %d", e.ID.Short(), e.Offset, off)
		}
		off += e.Length
		got, err := OpenBlob(k, e, p.data[e.Offset:e.Offset+e.Length], nil)
		if err != nil || !bytes.Equal(got, p.plains[e.ID]) {
			t.Fatalf("blob %s: %v", e.ID.Short(), err)
		}
	}
}

func TestPackRoundTrip(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for _, c := range []struct {
		name        string
		k           *crypt.TierKeys
		count, max  int
		wantOneLoad bool
	}{
		{"empty", wsKeys, 0, 0, true},
		{"one empty blob", wsKeys, 1, 0, true},
		{"small", sensKeys, 5, 2000, true},
		{"many", wsKeys, 60, 200_000, true},
		// Over 1,335 entries: the header no longer fits the first 64 KiB read.
		{"many tiny", sensKeys, 2000, 30, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := buildPack(t, r, c.k, c.count, c.max)
			checkPack(t, p, c.k)
			l := &loader{data: p.data}
			if _, _, err := ReadHeader(context.Background(), int64(len(p.data)), l.load, bothTiers); err != nil {
				t.Fatal(err)
			}
			if oneLoad := len(l.calls) == 1; oneLoad != c.wantOneLoad {
				t.Fatalf("ReadHeader made %d loads %v for a %d-byte pack", len(l.calls), l.calls, len(p.data))
			}
			if first := l.calls[0]; first[1] != min(int64(len(p.data)), tailGuess) || first[0]+first[1] != int64(len(p.data)) {
				t.Fatalf("first load %v is not the pack's last 64 KiB", first)
			}
			t.Logf("%d blobs, %d-byte pack, loads %v", len(p.entries), len(p.data), l.calls)
		})
	}
}

// TestPackHeaderAt64KiBBoundary: 1,335 entries make a 60 KiB plaintext
// header that fits ReadHeader's first 64 KiB read with the trailer; 1,336
// make a 64 KiB header that does not.
func TestPackHeaderAt64KiBBoundary(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ count, loads int }{{1335, 1}, {1336, 2}} {
		var blobs []SealedBlob
		plains := map[blob.ID][]byte{}
		for i := range c.count {
			plain := binary.LittleEndian.AppendUint64(nil, uint64(i))
			sb := sealBlob(t, wsKeys, blob.Data, plain, CompressOff)
			blobs, plains[sb.ID] = append(blobs, sb), plain
		}
		p := finishPack(t, wsKeys, blobs, plains)
		checkPack(t, p, wsKeys)
		l := &loader{data: p.data}
		if _, entries, err := ReadHeader(context.Background(), int64(len(p.data)), l.load, bothTiers); err != nil || len(entries) != c.count {
			t.Fatalf("%d entries: ReadHeader = %d entries, %v", c.count, len(entries), err)
		}
		if len(l.calls) != c.loads {
			t.Fatalf("%d entries in a %d-byte pack: loads %v, want %d", c.count, len(p.data), l.calls, c.loads)
		}
	}
}

func TestPackLockedTier(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	p := buildPack(t, r, sensKeys, 3, 1000)
	l := &loader{data: p.data}
	tr, entries, err := ReadHeader(context.Background(), int64(len(p.data)), l.load, ring(wsKeys))
	if !errors.Is(err, crypt.ErrTierLocked) || tr.Tier != blob.Sensitive || entries != nil {
		t.Fatalf("ReadHeader = %+v, %d entries, %v; want the sensitive trailer and ErrTierLocked", tr, len(entries), err)
	}
	if _, _, err := Verify(p.data, p.id, ring(wsKeys)); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("Verify: %v, want ErrTierLocked", err)
	}
	// Same key bytes labelled with the other tier do not open it either.
	impostor := crypt.NewTierKeys(blob.Sensitive, wsKeys.Enc, wsKeys.IDKey)
	if _, _, err := Verify(p.data, p.id, ring(impostor)); !errors.Is(err, crypt.ErrAuth) {
		t.Fatalf("Verify with wrong sensitive keys: %v, want ErrAuth", err)
	}
}

// damaged runs ReadHeader and Verify (against the damaged bytes' own hash,
// so Verify checks more than the name) and returns their errors.
func damaged(t *testing.T, data []byte) (readErr, verifyErr error) {
	t.Helper()
	l := &loader{data: data}
	_, _, readErr = ReadHeader(context.Background(), int64(len(data)), l.load, bothTiers)
	_, _, verifyErr = Verify(data, blake3.Sum256(data), bothTiers)
	return readErr, verifyErr
}

func isFormatOrAuth(err error) bool {
	return errors.Is(err, ErrFormat) || errors.Is(err, crypt.ErrAuth)
}

func TestPackDamage(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	p := buildPack(t, r, wsKeys, 6, 3000)
	size := len(p.data)
	tr, err := DecodeTrailer(p.data[size-TrailerSize:], int64(size))
	if err != nil {
		t.Fatal(err)
	}
	blobEnd := size - TrailerSize - int(tr.HeaderLen)

	// The stored name must match.
	if _, _, err := Verify(p.data, blob.ID{}, bothTiers); !errors.Is(err, ErrFormat) {
		t.Errorf("Verify under the wrong id: %v", err)
	}

	// Every truncation fails Verify. Cutting the end fails ReadHeader too;
	// cutting the start it cannot see while the header's entries still fit.
	for n := 0; n < size; n++ {
		rerr, verr := damaged(t, p.data[:n])
		if !isFormatOrAuth(rerr) || !isFormatOrAuth(verr) {
			t.Fatalf("first %d of %d bytes: ReadHeader %v, Verify %v", n, size, rerr, verr)
		}
		rerr, verr = damaged(t, p.data[size-n:])
		if (rerr != nil && !isFormatOrAuth(rerr)) || !isFormatOrAuth(verr) {
			t.Fatalf("last %d of %d bytes: ReadHeader %v, Verify %v", n, size, rerr, verr)
		}
	}

	// A bit flip in the header or trailer fails both.
	for i := blobEnd; i < size; i++ {
		d := bytes.Clone(p.data)
		d[i] ^= 1 << (i % 8)
		rerr, verr := damaged(t, d)
		if !isFormatOrAuth(rerr) || !isFormatOrAuth(verr) {
			t.Fatalf("bit flipped at %d (header starts at %d): ReadHeader %v, Verify %v", i, blobEnd, rerr, verr)
		}
	}

	// A bit flip in a blob is invisible to ReadHeader but fails Verify.
	for _, e := range p.entries {
		for _, i := range []uint32{e.Offset, e.Offset + e.Length/2, e.Offset + e.Length - 1} {
			d := bytes.Clone(p.data)
			d[i] ^= 0x10
			rerr, verr := damaged(t, d)
			if rerr != nil || !errors.Is(verr, crypt.ErrAuth) {
				t.Fatalf("blob byte %d flipped: ReadHeader %v (want nil), Verify %v (want ErrAuth)", i, rerr, verr)
			}
		}
	}

	// The padding between blobs and header is not authenticated, but a
	// changed pack no longer matches its name.
	if last := p.entries[len(p.entries)-1]; int(last.Offset+last.Length) < blobEnd {
		d := bytes.Clone(p.data)
		d[blobEnd-1] ^= 1
		if _, _, err := Verify(d, p.id, bothTiers); !errors.Is(err, ErrFormat) {
			t.Errorf("padding changed: Verify under the old name: %v", err)
		}
	}

	// A blob overwritten with the start of another fails Verify.
	d := bytes.Clone(p.data)
	a, b := p.entries[0], p.entries[1]
	copy(d[a.Offset:], p.data[b.Offset:b.Offset+min(a.Length, b.Length)])
	if _, verr := damaged(t, d); !errors.Is(verr, crypt.ErrAuth) {
		t.Errorf("blob overwritten by another: Verify %v", verr)
	}
}

func TestPackGarbage(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for _, n := range []int{0, 1, 15, 16, 17, 56, 100, 5000, 70_000} {
		g := seedtest.Bytes(r, n)
		if rerr, verr := damaged(t, g); !isFormatOrAuth(rerr) || !isFormatOrAuth(verr) {
			t.Fatalf("%d random bytes: ReadHeader %v, Verify %v", n, rerr, verr)
		}
		// Random bytes behind a well-formed trailer fail authentication.
		if n >= crypt.Overhead {
			g = append(g, encodeTrailer(Trailer{HeaderLen: uint32(n / 2), Tier: blob.Workspace})...)
			if n/2 < crypt.Overhead {
				continue
			}
			if rerr, verr := damaged(t, g); !errors.Is(rerr, crypt.ErrAuth) || !errors.Is(verr, crypt.ErrAuth) {
				t.Fatalf("%d random bytes and a trailer: ReadHeader %v, Verify %v", n, rerr, verr)
			}
		}
	}
}

func TestPackHugeHeaderLength(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	p := buildPack(t, r, wsKeys, 3, 1000)
	size := len(p.data)
	for _, hl := range []uint32{1<<32 - 1, MaxHeaderSize + 1, uint32(size - TrailerSize + 1), crypt.Overhead - 1, 0} {
		d := bytes.Clone(p.data)
		binary.LittleEndian.PutUint32(d[size-TrailerSize:], hl)
		l := &loader{data: d}
		_, _, err := ReadHeader(context.Background(), int64(size), l.load, bothTiers)
		if !errors.Is(err, ErrFormat) {
			t.Errorf("header length %d: ReadHeader %v, want ErrFormat", hl, err)
		}
		if len(l.calls) != 1 {
			t.Errorf("header length %d: ReadHeader loaded %v", hl, l.calls)
		}
		if _, _, err := Verify(d, blake3.Sum256(d), bothTiers); !errors.Is(err, ErrFormat) {
			t.Errorf("header length %d: Verify %v, want ErrFormat", hl, err)
		}
	}
	// A plausible but wrong header length fails authentication.
	d := bytes.Clone(p.data)
	tr, _ := DecodeTrailer(d[size-TrailerSize:], int64(size))
	binary.LittleEndian.PutUint32(d[size-TrailerSize:], tr.HeaderLen+1)
	if rerr, verr := damaged(t, d); !errors.Is(rerr, crypt.ErrAuth) || !errors.Is(verr, crypt.ErrAuth) {
		t.Errorf("header length +1: ReadHeader %v, Verify %v", rerr, verr)
	}
}

func TestReadHeaderBadSizes(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	p := buildPack(t, r, wsKeys, 3, 1000)
	for _, size := range []int64{-1, 0, TrailerSize - 1, MaxPackSize + 1} {
		l := &loader{data: p.data}
		if _, _, err := ReadHeader(context.Background(), size, l.load, bothTiers); !errors.Is(err, ErrFormat) {
			t.Errorf("pack size %d: %v", size, err)
		}
		if len(l.calls) != 0 {
			t.Errorf("pack size %d: loaded %v", size, l.calls)
		}
	}
	// A pack size larger than the real pack makes the loader fail, not us.
	l := &loader{data: p.data}
	if _, _, err := ReadHeader(context.Background(), int64(len(p.data))+1, l.load, bothTiers); err == nil {
		t.Error("pack size one too large: no error")
	}
}

// TestReadHeaderShortLoader: a loader that breaks its contract and returns
// fewer bytes than asked (from either end) must cause an error, not a panic.
func TestReadHeaderShortLoader(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	for _, p := range []testPack{buildPack(t, r, wsKeys, 3, 1000), buildPack(t, r, wsKeys, 2000, 10)} {
		for _, short := range []int{1, TrailerSize - 1, TrailerSize, 1000, 1 << 20} {
			for _, fromEnd := range []bool{false, true} {
				loads := 0
				load := func(ctx context.Context, off int64, n int) ([]byte, error) {
					loads++
					b := p.data[off : off+int64(n)]
					if loads == 1 && len(p.entries) < 100 || loads == 2 {
						if s := min(short, len(b)); fromEnd {
							b = b[:len(b)-s]
						} else {
							b = b[s:]
						}
					}
					return b, nil
				}
				_, _, err := ReadHeader(context.Background(), int64(len(p.data)), load, bothTiers)
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("%d entries, loader %d bytes short (from end %v) on load %d: %v", len(p.entries), short, fromEnd, loads, err)
				}
			}
		}
	}
}

func TestReadHeaderLoaderError(t *testing.T) {
	t.Parallel()
	boom := errors.New("backend down")
	_, _, err := ReadHeader(context.Background(), 100_000, func(context.Context, int64, int) ([]byte, error) { return nil, boom }, bothTiers)
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the loader's error", err)
	}
}

func TestWriterPaddingIsRandom(t *testing.T) {
	t.Parallel()
	// Two packs with the same blobs differ (random nonces and padding) but
	// have the same length.
	r := seedtest.Rand(t)
	plain := textBytes(r, 5000)
	sb := sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)
	var packs [][]byte
	for range 2 {
		w := NewWriter(wsKeys, 0)
		w.Add(sb)
		d, _, _, _, _ := w.Finish()
		packs = append(packs, d)
	}
	if len(packs[0]) != len(packs[1]) || bytes.Equal(packs[0], packs[1]) {
		t.Fatalf("packs of %d and %d bytes, equal %v", len(packs[0]), len(packs[1]), bytes.Equal(packs[0], packs[1]))
	}
	n := len(sb.Data)
	blobEnd := len(packs[0]) - TrailerSize - (4096 + crypt.Overhead)
	if blobEnd-n < 64 {
		t.Skipf("only %d bytes of padding", blobEnd-n)
	}
	if bytes.Equal(packs[0][n:blobEnd], packs[1][n:blobEnd]) || allZero(packs[0][n:blobEnd]) {
		t.Fatal("padding is not random")
	}
}
