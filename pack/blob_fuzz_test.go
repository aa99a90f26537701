package pack

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// FuzzOpenBlob: blobs come from storage and are opened (decrypted, then
// zstd-decompressed when flagged) on every read path (repo, restore,
// prune's repack, pack checks). The fuzzed bytes are the payload inside
// the authenticated envelope, so they reach the decompressor as a
// corrupted or hostile writer holding the key would have them. Any
// payload, flags and plain length either open to exactly the plain length
// the entry declares (and to the payload itself when not compressed), or
// are refused with an error; never a panic, never more than MaxBlobSize
// allocated by the declared length. What opens passes OpenVerified under
// its own id and is refused under another id, and a changed sealed byte is
// refused. Plain lengths up to MaxBlobSize are taken modulo 1 MiB, so an
// iteration stays cheap; larger ones are kept, to check their refusal.
func FuzzOpenBlob(f *testing.F) {
	k := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), crypt.NewRandomKey())
	text := []byte(strings.Repeat("lifeboat keeps the last good checkpoint. ", 200))
	for _, c := range []Compression{CompressFastest, CompressDefault, CompressBetter} {
		z, flags, err := Compress(text, c)
		if err != nil || flags != FlagZstd {
			f.Fatalf("Compress at %s: flags %d, %v", c, flags, err)
		}
		f.Add(bytes.Clone(z), uint32(len(text)), flags, uint8(blob.Data))
		f.Add(bytes.Clone(z), uint32(len(text)-1), flags, uint8(blob.Tree)) // declared one byte short
		f.Add(bytes.Clone(z[:len(z)/2]), uint32(len(text)), flags, uint8(blob.Data))
	}
	big := make([]byte, 2<<20)
	z, _, err := Compress(big, CompressFastest)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bytes.Clone(z), uint32(100), FlagZstd, uint8(blob.Data)) // expands far beyond what it declares
	f.Add(text, uint32(len(text)), uint8(0), uint8(blob.Data))
	f.Add(text, uint32(MaxBlobSize+1), uint8(0), uint8(blob.Data))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint32(10), FlagZstd, uint8(blob.Data))
	f.Add([]byte{}, uint32(0), FlagZstd, uint8(3))
	f.Fuzz(func(t *testing.T, payload []byte, plainLen uint32, flags uint8, typ uint8) {
		if plainLen <= MaxBlobSize {
			plainLen %= 1 << 20
		}
		id := blob.ID{typ, flags, 0x5a}
		sealed := Seal(nil, k, blob.Type(typ), id, flags, payload)
		e := Entry{Type: blob.Type(typ), Flags: flags, ID: id, Length: uint32(len(sealed)), PlainLen: plainLen}
		out, err := OpenBlob(k, e, sealed, nil)
		if err != nil {
			if out != nil {
				t.Fatalf("refused blob came with %d bytes", len(out))
			}
			return
		}
		if plainLen > MaxBlobSize || len(out) != int(plainLen) {
			t.Fatalf("opened %d bytes for a declared plain length of %d", len(out), plainLen)
		}
		if flags&FlagZstd == 0 && !bytes.Equal(out, payload) {
			t.Fatal("an uncompressed blob opened to other bytes than its payload")
		}
		e.ID = k.BlobID(out)
		sealed = Seal(nil, k, e.Type, e.ID, flags, payload)
		got, err := OpenVerified(k, e, sealed, nil)
		if err != nil || !bytes.Equal(got, out) {
			t.Fatalf("OpenVerified under its own id: %v", err)
		}
		wrong := e
		wrong.ID[0] ^= 1
		if _, err := OpenVerified(k, wrong, Seal(nil, k, wrong.Type, wrong.ID, flags, payload), nil); !errors.Is(err, crypt.ErrAuth) {
			t.Fatalf("OpenVerified under another id: %v; want ErrAuth", err)
		}
		sealed[len(sealed)/2] ^= 1
		if _, err := OpenBlob(k, e, sealed, nil); err == nil {
			t.Fatal("a changed sealed byte opens")
		}
	})
}
