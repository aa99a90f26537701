package index

import (
	"encoding/binary"
	"errors"
	"fmt"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/pack"
)

// ErrFormat marks an index object whose plaintext does not follow the format.
var ErrFormat = errors.New("malformed index object")

// ObjectVersion is the index object format version.
const ObjectVersion = 1

// MaxObjectEntries is how many blob entries a writer puts in one object
// (about 4 MiB); readers accept any count the bytes can hold.
const MaxObjectEntries = 90_000

// PackInfo lists the blobs of one pack.
type PackInfo struct {
	ID      blob.ID
	Size    uint32
	Entries []pack.Entry
}

// Object is one index object: packs of one tier and the index objects it
// replaces (written by prune and repair; empty otherwise).
type Object struct {
	Tier       blob.Tier
	Supersedes []blob.ID
	Packs      []PackInfo
}

// Entries is the number of blob entries across all packs.
func (o *Object) Entries() int {
	n := 0
	for _, p := range o.Packs {
		n += len(p.Entries)
	}
	return n
}

// Encode returns the plaintext form of o.
func (o *Object) Encode() []byte {
	b := make([]byte, 0, 12+len(o.Supersedes)*blob.IDSize+len(o.Packs)*40+o.Entries()*pack.EntrySize)
	b = append(b, 'L', 'B', 'I', 'X', ObjectVersion, byte(o.Tier))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(o.Supersedes)))
	for _, id := range o.Supersedes {
		b = append(b, id[:]...)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(o.Packs)))
	for _, p := range o.Packs {
		b = append(b, p.ID[:]...)
		b = binary.LittleEndian.AppendUint32(b, p.Size)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Entries)))
		for _, e := range p.Entries {
			b = pack.AppendEntry(b, e)
		}
	}
	return b
}

// Decode parses the plaintext of an index object.
func Decode(b []byte) (*Object, error) {
	r := reader{b: b}
	magic := r.next(6)
	if r.err != nil || string(magic[:4]) != "LBIX" {
		return nil, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	if magic[4] != ObjectVersion {
		return nil, fmt.Errorf("%w: version %d, this lifeboat reads version %d", ErrFormat, magic[4], ObjectVersion)
	}
	o := &Object{Tier: blob.Tier(magic[5])}
	if !o.Tier.Valid() {
		return nil, fmt.Errorf("%w: unknown tier %d", ErrFormat, magic[5])
	}
	n := r.count(blob.IDSize)
	for range n {
		o.Supersedes = append(o.Supersedes, blob.ID(r.next(blob.IDSize)))
	}
	n = r.count(blob.IDSize + 8)
	o.Packs = make([]PackInfo, 0, n)
	for range n {
		p := PackInfo{ID: blob.ID(r.next(blob.IDSize)), Size: r.u32()}
		m := r.count(pack.EntrySize)
		p.Entries = make([]pack.Entry, 0, m)
		for range m {
			e := pack.DecodeEntry(r.next(pack.EntrySize))
			if err := e.Check(int64(p.Size)); err != nil {
				return nil, fmt.Errorf("%w: pack %s: %v", ErrFormat, p.ID.Short(), err)
			}
			p.Entries = append(p.Entries, e)
		}
		if r.err != nil {
			break
		}
		o.Packs = append(o.Packs, p)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrFormat, len(r.b))
	}
	return o, nil
}

// Seal encrypts o with its tier's keys as a stored index object.
func Seal(k *crypt.TierKeys, o *Object) ([]byte, error) {
	if k.Tier != o.Tier {
		return nil, fmt.Errorf("index object of tier %s sealed with %s keys", o.Tier, k.Tier)
	}
	return crypt.SealObject(k, crypt.KindIndex, o.Encode()), nil
}

// Open decrypts and decodes a stored index object. An object of a tier m
// lacks fails with an error wrapping crypt.ErrTierLocked.
func Open(m *crypt.MasterKeys, data []byte) (*Object, error) {
	t, plain, err := crypt.OpenObject(m, crypt.KindIndex, data)
	if err != nil {
		return nil, err
	}
	o, err := Decode(plain)
	if err != nil {
		return nil, err
	}
	if o.Tier != t {
		return nil, fmt.Errorf("%w: sealed as %s but says %s", ErrFormat, t, o.Tier)
	}
	return o, nil
}

// reader consumes b with bounds checks; the first failure sticks in err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) next(n int) []byte {
	if r.err != nil || n > len(r.b) {
		if r.err == nil {
			r.err = fmt.Errorf("%w: truncated", ErrFormat)
		}
		return make([]byte, n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }

// count reads a count of items of at least minSize bytes each and refuses
// one the remaining bytes cannot hold, so no huge allocation follows.
func (r *reader) count(minSize int) int {
	n := int64(r.u32())
	if r.err == nil && n*int64(minSize) > int64(len(r.b)) {
		r.err = fmt.Errorf("%w: count %d exceeds the remaining %d bytes", ErrFormat, n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}
