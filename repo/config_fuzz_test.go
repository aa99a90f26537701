package repo

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/chunk"
	"lifeboat/crypt"
	"lifeboat/pack"
)

// FuzzDecodeConfig: the repository config comes from storage, and its
// public part is read before any key is known. Any bytes either decode
// into a config whose fields are in range, which encodes again to a
// config that decodes to the same bytes, or are refused with ErrCorrupt or
// ErrNewerFormat; never a panic. A decoded config's sealed sections open
// with the keys that sealed them (the seed config) or are refused with
// ErrCorrupt.
func FuzzDecodeConfig(f *testing.F) {
	keys := crypt.NewMasterKeys()
	p := Params{Version: FormatVersion, ID: blob.ID{1, 2, 3}, Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		PackSize: DefaultPackSize, Compression: pack.CompressFastest, Chunker: chunk.DefaultParams}
	cfg, _, err := newConfig(keys, p)
	if err != nil {
		f.Fatal(err)
	}
	good, err := json.Marshal(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"id":"` + p.ID.String() + `","created":"2026-01-02T03:04:05Z","pack_size":1,"compression":"fastest","chunker":{"min":1,"max":2,"average_bits":1},"tiers":{}}`))
	f.Add(bytes.Replace(good, []byte(`"fastest"`), []byte(`"best"`), 1))
	f.Add(bytes.Replace(good, []byte(`"tiers":{`), []byte(`"extra":1,"tiers":{`), 1))
	f.Add(append(bytes.Clone(good), `{}`...))
	f.Add([]byte(`{"version":1,"tiers":{"nosuchtier":"AAAA"}}`))
	f.Add(bytes.Replace(good, []byte(`"2026-01-02T03:04:05Z"`), []byte(`"2026-01-02T03:04:05+24:00"`), 1)) // decodes, does not encode
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeConfig(data, "fuzz")
		if err != nil {
			if c != nil || !(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerFormat)) {
				t.Fatalf("decodeConfig = %v, %v; want nil and ErrCorrupt or ErrNewerFormat", c, err)
			}
			return
		}
		if c.Version != FormatVersion || c.Chunker.Validate() != nil || c.PackSize < 1<<20 || c.PackSize > pack.MaxPackSize/2 {
			t.Fatalf("accepted config %+v", c.Params)
		}
		if _, err := pack.ParseCompression(string(c.Compression)); err != nil {
			t.Fatalf("accepted compression %q", c.Compression)
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("a decoded config does not encode: %v", err)
		}
		again, err := decodeConfig(enc, "fuzz")
		if err != nil {
			t.Fatalf("a decoded config, encoded again, is refused: %v\n%s", err, enc)
		}
		if enc2, _ := json.Marshal(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ:\n%s\n%s", enc, enc2)
		}
		pols, err := c.openSections(keys)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("openSections: %v; want ErrCorrupt", err)
			}
			return
		}
		if len(pols) != len(keys.Tiers()) {
			t.Fatalf("%d polynomials for %d tiers", len(pols), len(keys.Tiers()))
		}
		for tier, pol := range pols {
			if pol == 0 || !pol.Irreducible() {
				t.Fatalf("tier %s: accepted polynomial %v", tier, pol)
			}
		}
	})
}
