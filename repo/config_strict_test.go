package repo

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/chunk"
	"lifeboat/crypt"
	"lifeboat/pack"
)

// The config's public part is refused as corrupt, naming it, when it has
// anything but white space after its JSON object, or a creation time Go
// decodes but cannot write back (as written, or in UTC).
func TestDecodeConfigStrict(t *testing.T) {
	p := Params{Version: FormatVersion, ID: blob.ID{1, 2, 3}, Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		PackSize: DefaultPackSize, Compression: pack.CompressFastest, Chunker: chunk.DefaultParams}
	cfg, _, err := newConfig(crypt.NewMasterKeys(), p)
	if err != nil {
		t.Fatal(err)
	}
	good, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeConfig(append(bytes.Clone(good), " \n"...), "repo/config"); err != nil {
		t.Fatalf("a config followed by white space: %v", err)
	}
	created := []byte(`"2026-01-02T03:04:05Z"`)
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"a second object":   {append(bytes.Clone(good), ` {}`...), "not valid JSON"},
		"trailing garbage":  {append(bytes.Clone(good), `x`...), "not valid JSON"},
		"offset +24:00":     {bytes.Replace(good, created, []byte(`"2026-01-02T03:04:05+24:00"`), 1), "cannot be written back"},
		"year 10000 in UTC": {bytes.Replace(good, created, []byte(`"9999-12-31T23:00:00-05:00"`), 1), "cannot be written back"},
	} {
		c2, err := decodeConfig(c.data, "repo/config")
		if c2 != nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "repo/config") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: decodeConfig = %v, %v; want ErrCorrupt naming the config, saying %q", name, c2, err, c.want)
		}
	}
}
