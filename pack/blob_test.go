package pack

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/seedtest"
)

// openBlob opens sb with OpenBlob, and a copy of it with OpenVerifiedInPlace,
// which must give the same plaintext and leave sb's own bytes alone.
func openBlob(t testing.TB, k *crypt.TierKeys, sb SealedBlob) []byte {
	t.Helper()
	got, err := OpenBlob(k, entryOf(sb), sb.Data, nil)
	if err != nil {
		t.Fatalf("OpenBlob: %v", err)
	}
	scratch := bytes.Clone(sb.Data)
	inPlace, err := OpenVerifiedInPlace(k, entryOf(sb), scratch, nil)
	if err != nil || !bytes.Equal(inPlace, got) {
		t.Fatalf("OpenVerifiedInPlace: %v, or its plaintext differs from OpenBlob's", err)
	}
	if _, err := OpenBlob(k, entryOf(sb), sb.Data, nil); err != nil {
		t.Fatalf("OpenBlob after OpenVerifiedInPlace of a copy: %v", err)
	}
	return got
}

func TestSealBlobRoundTrip(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	big := append(textBytes(r, 4<<20), seedtest.Bytes(r, 4<<20)...)
	cases := []struct {
		name       string
		plain      []byte
		compressed bool
	}{
		{"text", textBytes(r, 100_000), true},
		{"random", seedtest.Bytes(r, 100_000), false},
		{"empty", nil, false},
		{"one byte", []byte{'x'}, false},
		{"63 zero bytes", make([]byte, 63), false}, // below the compression threshold
		{"64 zero bytes", make([]byte, 64), true},
		{"8 MiB mixed", big, true},
		{"8 MiB random", seedtest.Bytes(r, 8<<20), false},
	}
	for _, c := range cases {
		for _, k := range []*crypt.TierKeys{wsKeys, sensKeys} {
			sb := sealBlob(t, k, blob.Data, c.plain, CompressDefault)
			if sb.Type != blob.Data || sb.ID != k.BlobID(c.plain) || sb.PlainLen != uint32(len(c.plain)) {
				t.Fatalf("%s: sealed blob describes %s %s %d", c.name, sb.Type, sb.ID.Short(), sb.PlainLen)
			}
			if compressed := sb.Flags == FlagZstd; compressed != c.compressed {
				t.Fatalf("%s: flags %#x, want compressed=%v", c.name, sb.Flags, c.compressed)
			}
			if !c.compressed && len(sb.Data) != len(c.plain)+crypt.Overhead {
				t.Fatalf("%s: stored raw in %d bytes, want %d", c.name, len(sb.Data), len(c.plain)+crypt.Overhead)
			}
			if c.compressed && len(sb.Data) > len(c.plain)-len(c.plain)/32+crypt.Overhead {
				t.Fatalf("%s: compressed to %d of %d bytes", c.name, len(sb.Data), len(c.plain))
			}
			if err := entryOf(sb).Check(int64(len(sb.Data))); err != nil {
				t.Fatalf("%s: entry of a fresh blob fails Check: %v", c.name, err)
			}
			if got := openBlob(t, k, sb); !bytes.Equal(got, c.plain) {
				t.Fatalf("%s: round trip differs", c.name)
			}
		}
	}
}

func TestSealBlobCompressionLevels(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	text := textBytes(r, 300_000)
	random := seedtest.Bytes(r, 300_000)
	sizes := map[Compression]int{}
	for _, c := range []Compression{CompressOff, CompressFastest, CompressDefault, CompressBetter} {
		sb := sealBlob(t, wsKeys, blob.Tree, text, c)
		if (sb.Flags == FlagZstd) != (c != CompressOff) {
			t.Fatalf("%s: text stored with flags %#x", c, sb.Flags)
		}
		if got := openBlob(t, wsKeys, sb); !bytes.Equal(got, text) {
			t.Fatalf("%s: text round trip differs", c)
		}
		sizes[c] = len(sb.Data)
		sr := sealBlob(t, wsKeys, blob.Data, random, c)
		if sr.Flags != 0 || len(sr.Data) != len(random)+crypt.Overhead {
			t.Fatalf("%s: random data stored with flags %#x in %d bytes", c, sr.Flags, len(sr.Data))
		}
		if got := openBlob(t, wsKeys, sr); !bytes.Equal(got, random) {
			t.Fatalf("%s: random round trip differs", c)
		}
	}
	t.Logf("text of %d bytes sealed to %v", len(text), sizes)
	if sizes[CompressBetter] > sizes[CompressFastest] {
		t.Errorf("better (%d bytes) compressed worse than fastest (%d bytes)", sizes[CompressBetter], sizes[CompressFastest])
	}
}

func TestSealBlobTooLarge(t *testing.T) {
	t.Parallel()
	if _, err := SealBlob(wsKeys, blob.Data, blob.ID{}, make([]byte, MaxBlobSize+1), CompressFastest); err == nil {
		t.Fatal("sealed a blob above MaxBlobSize")
	}
}

func TestSealBlobMaxSize(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("64 MiB blob")
	}
	plain := make([]byte, MaxBlobSize)
	copy(plain[1000:], "not only zeros")
	sb := sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)
	if sb.Flags != FlagZstd {
		t.Fatal("64 MiB of zeros not compressed")
	}
	if got := openBlob(t, wsKeys, sb); !bytes.Equal(got, plain) {
		t.Fatal("round trip differs")
	}
}

// Every opener refuses a blob under the wrong key, tier, type, id, flags or
// lengths, and a truncated or damaged one; openBlobInPlace works on a copy.
func TestOpenBlobRefusesMismatch(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	openers := []struct {
		name string
		open func(k *crypt.TierKeys, e Entry, sealed []byte) ([]byte, error)
	}{
		{"OpenBlob", func(k *crypt.TierKeys, e Entry, sealed []byte) ([]byte, error) { return OpenBlob(k, e, sealed, nil) }},
		{"openBlobInPlace", func(k *crypt.TierKeys, e Entry, sealed []byte) ([]byte, error) {
			return openBlobInPlace(k, e, bytes.Clone(sealed), nil)
		}},
	}
	for _, plain := range [][]byte{textBytes(r, 10_000), seedtest.Bytes(r, 10_000), nil} {
		for _, o := range openers {
			refusesMismatch(t, o.name, o.open, plain)
		}
	}
}

func refusesMismatch(t *testing.T, name string, open func(k *crypt.TierKeys, e Entry, sealed []byte) ([]byte, error), plain []byte) {
	sb := sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)
	e := entryOf(sb)
	otherWS := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), wsKeys.IDKey)
	sensSameKey := crypt.NewTierKeys(blob.Sensitive, wsKeys.Enc, wsKeys.IDKey)
	authCases := []struct {
		name string
		k    *crypt.TierKeys
		edit func(*Entry)
	}{
		{"sensitive tier keys", sensKeys, func(*Entry) {}},
		{"same key labelled sensitive", sensSameKey, func(*Entry) {}},
		{"other workspace key", otherWS, func(*Entry) {}},
		{"type swapped", wsKeys, func(e *Entry) { e.Type = blob.Tree }},
		{"id swapped", wsKeys, func(e *Entry) { e.ID[0] ^= 1 }},
		{"flags flipped", wsKeys, func(e *Entry) { e.Flags ^= FlagZstd }},
		{"unknown flag", wsKeys, func(e *Entry) { e.Flags |= 0x80 }},
	}
	for _, c := range authCases {
		e2 := e
		c.edit(&e2)
		if got, err := open(c.k, e2, sb.Data); !errors.Is(err, crypt.ErrAuth) || got != nil {
			t.Errorf("%s, %d bytes, %s: got %d bytes, %v; want ErrAuth", name, len(plain), c.name, len(got), err)
		}
	}
	for _, c := range []struct {
		name string
		edit func(*Entry)
	}{
		{"plain length +1", func(e *Entry) { e.PlainLen++ }},
		{"plain length -1", func(e *Entry) { e.PlainLen-- }},
		{"plain length huge", func(e *Entry) { e.PlainLen = 1<<32 - 1 }},
		{"sealed length -1", func(e *Entry) { e.Length-- }},
	} {
		e2 := e
		c.edit(&e2)
		if got, err := open(wsKeys, e2, sb.Data); err == nil || got != nil {
			t.Errorf("%s, %d bytes, %s: got %d bytes, %v; want an error", name, len(plain), c.name, len(got), err)
		}
	}
	for n := range len(sb.Data) {
		if _, err := open(wsKeys, e, sb.Data[:n]); !errors.Is(err, crypt.ErrAuth) {
			t.Fatalf("%s, truncated to %d: %v", name, n, err)
		}
		d := bytes.Clone(sb.Data)
		d[n] ^= 4
		if _, err := open(wsKeys, e, d); !errors.Is(err, crypt.ErrAuth) {
			t.Fatalf("%s, byte %d flipped: %v", name, n, err)
		}
	}
}

func TestOpenBlobReusesDst(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	plain := textBytes(r, 50_000)
	sb := sealBlob(t, wsKeys, blob.Data, plain, CompressFastest)
	dst := make([]byte, 7, 100_000)
	got, err := OpenBlob(wsKeys, entryOf(sb), sb.Data, dst)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("OpenBlob = %v, equal %v", err, bytes.Equal(got, plain))
	}
	if &got[0] != &dst[:1][0] {
		t.Error("OpenBlob did not decompress into dst's storage")
	}
}

// TestSealBlobConcurrent shares the encoders and decoder between goroutines
// (run with -race).
func TestSealBlobConcurrent(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	inputs := make([][]byte, 8)
	for i := range inputs {
		inputs[i] = textBytes(r, 20_000*(i+1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(inputs))
	for _, c := range []Compression{CompressFastest, CompressDefault, CompressBetter, CompressOff} {
		for _, in := range inputs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := SealBlob(sensKeys, blob.Data, sensKeys.BlobID(in), in, c)
				if err != nil {
					errs <- err
					return
				}
				got, err := OpenBlob(sensKeys, entryOf(sb), sb.Data, nil)
				if err == nil && !bytes.Equal(got, in) {
					err = errors.New("concurrent round trip differs")
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestParseCompression(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"off", "fastest", "default", "better"} {
		if c, err := ParseCompression(s); err != nil || string(c) != s {
			t.Errorf("ParseCompression(%q) = %q, %v", s, c, err)
		}
	}
	for _, s := range []string{"", "best", "max", "Default", "zstd"} {
		if _, err := ParseCompression(s); err == nil {
			t.Errorf("ParseCompression(%q) succeeded", s)
		}
	}
}

// TestOpenBlobHugePlainLen: an entry from an unchecked source (the local
// index database) claiming a 4 GiB plain length must be refused, not
// allocated, even though the sealed blob itself is authentic.
func TestOpenBlobHugePlainLen(t *testing.T) {
	r := seedtest.Rand(t)
	sb := sealBlob(t, wsKeys, blob.Data, textBytes(r, 10_000), CompressFastest)
	e := entryOf(sb)
	e.PlainLen = 1<<32 - 1
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := OpenBlob(wsKeys, e, sb.Data, nil)
	runtime.ReadMemStats(&after)
	if err == nil || got != nil {
		t.Fatalf("OpenBlob = %d bytes, %v; want an error", len(got), err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
		t.Fatalf("OpenBlob allocated %d bytes for a lying entry", d)
	}
}
