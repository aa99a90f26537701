package crypt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/seedtest"
)

var (
	testPassword = []byte("correct horse battery staple")
	testRepoID   = blob.ID{1, 2, 3, 4, 5, 6, 7, 8}
)

func newKeyFile(t testing.TB, m *crypt.MasterKeys, tiers []blob.Tier) []byte {
	t.Helper()
	meta := crypt.KeyFileMeta{Created: time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), Hostname: "host", Username: "user"}
	data, err := crypt.NewKeyFile(m, tiers, testPassword, testKDF(), testRepoID, meta, nil)
	if err != nil {
		t.Fatalf("NewKeyFile: %v", err)
	}
	return data
}

func openKeyFile(data, password []byte, repo blob.ID) (*crypt.MasterKeys, error) {
	kf, err := crypt.DecodeKeyFile(data)
	if err != nil {
		return nil, err
	}
	return kf.Open(password, repo)
}

func sameTierKeys(t *testing.T, got, want *crypt.MasterKeys, tier blob.Tier) {
	t.Helper()
	g, w := mustTier(t, got, tier), mustTier(t, want, tier)
	if g.Tier != tier || g.Enc != w.Enc || g.IDKey != w.IDKey {
		t.Fatalf("%s tier keys differ after the key file round trip", tier)
	}
	// The rebuilt keys must work, not just compare equal.
	sealed := w.Seal(nil, []byte("x"), nil)
	if _, err := g.Open(nil, sealed, nil); err != nil {
		t.Fatalf("%s tier: reopened key cannot open: %v", tier, err)
	}
	if g.BlobID([]byte("x")) != w.BlobID([]byte("x")) {
		t.Fatalf("%s tier: reopened key names blobs differently", tier)
	}
}

func TestKeyFileBothTiers(t *testing.T) {
	t.Parallel()
	m := crypt.NewMasterKeys()
	data := newKeyFile(t, m, []blob.Tier{blob.Sensitive, blob.Workspace, blob.Sensitive}) // normalised on write
	kf, err := crypt.DecodeKeyFile(data)
	if err != nil {
		t.Fatal(err)
	}
	meta := kf.Meta()
	if !slices.Equal(meta.Tiers, blob.Tiers) || meta.Hostname != "host" || meta.Username != "user" ||
		!meta.Created.Equal(time.Date(2025, 1, 2, 2, 4, 5, 0, time.UTC)) || meta.Created.Location() != time.UTC {
		t.Fatalf("meta = %+v", meta)
	}
	got, err := kf.Open(testPassword, testRepoID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tiers(), blob.Tiers) {
		t.Fatalf("opened tiers %v", got.Tiers())
	}
	sameTierKeys(t, got, m, blob.Workspace)
	sameTierKeys(t, got, m, blob.Sensitive)
	if bytes.Contains(data, testPassword) {
		t.Fatal("key file contains the password")
	}
}

func TestKeyFileWorkspaceOnly(t *testing.T) {
	t.Parallel()
	m := crypt.NewMasterKeys()
	data := newKeyFile(t, m, []blob.Tier{blob.Workspace})
	got, err := openKeyFile(data, testPassword, testRepoID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tiers(), []blob.Tier{blob.Workspace}) || got.Has(blob.Sensitive) {
		t.Fatalf("opened tiers %v, want workspace only", got.Tiers())
	}
	sameTierKeys(t, got, m, blob.Workspace)
	if k, err := got.Tier(blob.Sensitive); !errors.Is(err, crypt.ErrTierLocked) || k != nil {
		t.Fatalf("Tier(sensitive) = %v, %v; want nil, ErrTierLocked", k, err)
	}
	// A workspace-only key hands on only what it has.
	if _, err := crypt.NewKeyFile(got, blob.Tiers, testPassword, testKDF(), testRepoID, crypt.KeyFileMeta{}, nil); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("re-wrapping both tiers from a workspace-only key: got %v, want ErrTierLocked", err)
	}
}

func TestNewKeyFileRefuses(t *testing.T) {
	t.Parallel()
	m := crypt.NewMasterKeys()
	bad := testKDF()
	bad.MemoryKiB = 1
	cases := []struct {
		name  string
		tiers []blob.Tier
		pw    []byte
		kdf   crypt.KDFParams
	}{
		{"sensitive only", []blob.Tier{blob.Sensitive}, testPassword, testKDF()},
		{"no tiers", nil, testPassword, testKDF()},
		{"unknown tier only", []blob.Tier{7}, testPassword, testKDF()},
		{"empty password", blob.Tiers, nil, testKDF()},
		{"bad kdf", blob.Tiers, testPassword, bad},
	}
	for _, c := range cases {
		if data, err := crypt.NewKeyFile(m, c.tiers, c.pw, c.kdf, testRepoID, crypt.KeyFileMeta{}, nil); err == nil {
			t.Errorf("%s: NewKeyFile succeeded: %s", c.name, data)
		}
	}
}

func TestKeyFileWrongPassword(t *testing.T) {
	t.Parallel()
	data := newKeyFile(t, crypt.NewMasterKeys(), blob.Tiers)
	for _, pw := range [][]byte{[]byte("wrong"), nil, append(bytes.Clone(testPassword), ' '), testPassword[:len(testPassword)-1]} {
		if m, err := openKeyFile(data, pw, testRepoID); !errors.Is(err, crypt.ErrWrongPassword) || m != nil {
			t.Errorf("password %q: got %v, %v; want nil, ErrWrongPassword", pw, m, err)
		}
	}
}

func TestKeyFileWrongRepository(t *testing.T) {
	t.Parallel()
	data := newKeyFile(t, crypt.NewMasterKeys(), blob.Tiers)
	other := testRepoID
	other[31] ^= 1
	if _, err := openKeyFile(data, testPassword, other); !errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatalf("got %v, want ErrWrongPassword", err)
	}
}

// editKeyFile decodes data as generic JSON, applies edit and re-encodes it.
func editKeyFile(t *testing.T, data []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	edit(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKeyFileTampered(t *testing.T) {
	t.Parallel()
	wsOnly := newKeyFile(t, crypt.NewMasterKeys(), []blob.Tier{blob.Workspace})
	both := newKeyFile(t, crypt.NewMasterKeys(), blob.Tiers)
	cases := []struct {
		name string
		data []byte
	}{
		{"sensitive added to a workspace-only key", editKeyFile(t, wsOnly, func(v map[string]any) {
			v["tiers"] = []any{"workspace", "sensitive"}
		})},
		{"sensitive removed from a two-tier key", editKeyFile(t, both, func(v map[string]any) {
			v["tiers"] = []any{"workspace"}
		})},
		{"salt changed", editKeyFile(t, both, func(v map[string]any) {
			v["kdf"].(map[string]any)["salt"] = make([]byte, 32)
		})},
		{"time changed", editKeyFile(t, both, func(v map[string]any) {
			v["kdf"].(map[string]any)["time"] = 2
		})},
		{"sealed data from another key file", editKeyFile(t, both, func(v map[string]any) {
			var o map[string]any
			_ = json.Unmarshal(newKeyFile(t, crypt.NewMasterKeys(), blob.Tiers), &o)
			v["data"] = o["data"]
		})},
	}
	for _, c := range cases {
		m, err := openKeyFile(c.data, testPassword, testRepoID)
		if err == nil {
			t.Errorf("%s: opened with tiers %v", c.name, m.Tiers())
			continue
		}
		if !errors.Is(err, crypt.ErrWrongPassword) && !errors.Is(err, crypt.ErrNotKeyFile) {
			t.Errorf("%s: got %v, want ErrWrongPassword or ErrNotKeyFile", c.name, err)
		}
	}
	// Flip every bit of the sealed data.
	kf, err := crypt.DecodeKeyFile(both)
	if err != nil {
		t.Fatal(err)
	}
	orig := kf.Data
	for i := range orig {
		kf.Data = bytes.Clone(orig)
		kf.Data[i] ^= 0x80
		if _, err := kf.Open(testPassword, testRepoID); !errors.Is(err, crypt.ErrWrongPassword) {
			t.Fatalf("byte %d of sealed data flipped: got %v, want ErrWrongPassword", i, err)
		}
	}
}

func TestDecodeKeyFileRefusesNonKeyFiles(t *testing.T) {
	r := seedtest.Rand(t)
	valid := newKeyFile(t, crypt.NewMasterKeys(), blob.Tiers)
	kdfEdit := func(field string, val any) []byte {
		return editKeyFile(t, valid, func(v map[string]any) { v["kdf"].(map[string]any)[field] = val })
	}
	edit := func(field string, val any) []byte {
		return editKeyFile(t, valid, func(v map[string]any) { v[field] = val })
	}
	cases := map[string][]byte{
		"empty":                nil,
		"random bytes":         randBytes(r, 300),
		"{}":                   []byte(`{}`),
		"null":                 []byte(`null`),
		"array":                []byte(`[1,2,3]`),
		"string":               []byte(`"lifeboat"`),
		"truncated":            valid[:len(valid)/2],
		"too large":            append(bytes.Repeat([]byte(" "), 64<<10), valid...),
		"version 2":            edit("version", 2),
		"version 0":            edit("version", 0),
		"unknown field":        edit("extra", true),
		"no tiers":             edit("tiers", []any{}),
		"tiers null":           edit("tiers", nil),
		"sensitive only":       edit("tiers", []any{"sensitive"}),
		"duplicate tier":       edit("tiers", []any{"workspace", "workspace"}),
		"unordered tiers":      edit("tiers", []any{"sensitive", "workspace"}),
		"unknown tier":         edit("tiers", []any{"workspace", "admin"}),
		"numeric tier":         edit("tiers", []any{1}),
		"short data":           edit("data", make([]byte, 39)),
		"no data":              edit("data", nil),
		"memory 100 GiB":       kdfEdit("memory_kib", 100*1024*1024),
		"memory 4 TiB":         kdfEdit("memory_kib", uint32(1<<32-1)),
		"memory overflow":      kdfEdit("memory_kib", uint64(1)<<40),
		"memory negative":      kdfEdit("memory_kib", -1),
		"time 1e9":             kdfEdit("time", 1_000_000_000),
		"time 0":               kdfEdit("time", 0),
		"threads 0":            kdfEdit("threads", 0),
		"threads 256":          kdfEdit("threads", 256),
		"algorithm scrypt":     kdfEdit("algorithm", "scrypt"),
		"salt short":           kdfEdit("salt", make([]byte, 8)),
		"kdf missing":          edit("kdf", nil),
		"trailing time float":  []byte(strings.Replace(string(kdfEdit("time", 7)), `"time":7`, `"time":1e9`, 1)),
		"nested junk in tiers": edit("tiers", map[string]any{"a": 1}),
		"trailing garbage":     append(bytes.Clone(valid), " garbage"...),
		"trailing brace":       append(bytes.Clone(valid), '}'),
		"two key files":        append(bytes.Clone(valid), valid...),
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for name, data := range cases {
		kf, err := crypt.DecodeKeyFile(data)
		if !errors.Is(err, crypt.ErrNotKeyFile) || kf != nil {
			t.Errorf("%s: DecodeKeyFile = %v, %v; want nil, ErrNotKeyFile", name, kf, err)
		}
	}
	runtime.ReadMemStats(&after)
	// No argon2 run, no allocation sized by the hostile parameters.
	if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
		t.Errorf("decoding hostile key files allocated %d bytes", d)
	}
}

func TestDecodeKeyFileAllowsTrailingWhitespace(t *testing.T) {
	t.Parallel()
	valid := newKeyFile(t, crypt.NewMasterKeys(), blob.Tiers)
	if _, err := crypt.DecodeKeyFile(append(bytes.Clone(valid), "\n \t\r\n"...)); err != nil {
		t.Fatalf("trailing whitespace refused: %v", err)
	}
}
