package repo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/crypto/argon2"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// Key-file denial of service: anyone who can write to keys/
// (knowing no password) adds key files with huge argon2id parameters,
// named to sort first and dated newest. None of these tests is parallel:
// they count derivations.

// captureWarnings collects the warnings of tr's openCounting (WithWarn)
// in a buffer, one a line.
func captureWarnings(tr *testRepo) *bytes.Buffer {
	tr.warnings = new(bytes.Buffer)
	return tr.warnings
}

// keyFileIDs lists the names in keys/.
func keyFileIDs(t *testing.T, be backend.Backend) []blob.ID {
	t.Helper()
	var ids []blob.ID
	must(t, be.List(context.Background(), backend.Key, func(fi backend.FileInfo) error {
		id, err := blob.ParseID(fi.Name)
		ids = append(ids, id)
		return err
	}))
	return ids
}

// forgeKeyFile stores a copy of the key file real with the given argon2id
// cost, created a year from now, its host name varied until its id sorts
// before every id in before: what an attacker with write access can do.
// Its sealed data is the real key's, so it opens with no password.
func forgeKeyFile(t *testing.T, be backend.Backend, real blob.ID, timeCost, memoryKiB uint32, before []blob.ID) blob.ID {
	t.Helper()
	ctx := context.Background()
	data, err := be.Load(ctx, backend.Handle{Type: backend.Key, Name: real.String()}, 0, 0)
	must(t, err)
	var kf crypt.KeyFile
	must(t, json.Unmarshal(data, &kf))
	kf.KDF.Time, kf.KDF.MemoryKiB = timeCost, memoryKiB
	kf.Created = time.Now().Add(365 * 24 * time.Hour).UTC()
	for i := 0; i < 1<<20; i++ {
		kf.Hostname = fmt.Sprintf("attacker-%d", i)
		out, err := json.Marshal(kf)
		must(t, err)
		id := blob.ID(blake3.Sum256(out))
		first := true
		for _, b := range before {
			first = first && bytes.Compare(id[:], b[:]) < 0
		}
		if first {
			must(t, be.Save(ctx, backend.Handle{Type: backend.Key, Name: id.String()}, out))
			return id
		}
	}
	t.Fatal("no forged key file name sorts first")
	return blob.ID{}
}

// forgeKeyFiles appends to forged n forged key files (see forgeKeyFile),
// each sorting before real and every key file forged before it.
func forgeKeyFiles(t *testing.T, be backend.Backend, real blob.ID, n int, timeCost, memoryKiB uint32, forged []blob.ID) []blob.ID {
	t.Helper()
	for range n {
		forged = append(forged, forgeKeyFile(t, be, real, timeCost, memoryKiB, append(forged, real)))
	}
	return forged
}

func openCounting(t *testing.T, tr *testRepo, pw []byte, hint string) (*Repository, uint64, error) {
	t.Helper()
	before := crypt.KeyDerivations()
	ctx := WithWarn(context.Background(), func(msg string) {
		if tr.warnings != nil {
			tr.warnings.WriteString(msg + "\n")
		}
	})
	r, err := Open(ctx, tr.be, pw, Options{CacheDir: tr.cache, KeyHint: hint, NoIndexDB: true})
	n := crypt.KeyDerivations() - before
	if r != nil {
		t.Cleanup(func() { _ = r.Close(context.Background()) })
	}
	return r, n, err
}

// Forged key files of 1 GiB and 16 passes (the campaign's), and some
// beyond even that, are refused before any derivation: opening derives
// once (the real key), each forged one is named in a warning with what to
// do, a wrong password still costs one derivation, and `key remove`
// removes them.
func TestForgedKeyFilesBeyondBoundsNeverDerived(t *testing.T) {
	ctx := context.Background()
	tr := newTestRepo(t)
	real := keyFileIDs(t, tr.be)[0]
	forged := forgeKeyFiles(t, tr.be, real, 4, 16, 1024*1024, nil)
	forged = forgeKeyFiles(t, tr.be, real, 1, 64, 4<<20, forged)
	logs := captureWarnings(tr)

	r, n, err := openCounting(t, tr, testPassword, "")
	must(t, err)
	if n != 1 || r.KeyID() != real {
		t.Fatalf("opened with key %s after %d derivations; want %s after 1", r.KeyID().Short(), n, real.Short())
	}
	for _, id := range forged {
		if !strings.Contains(logs.String(), "key file "+id.Short()+" refused before deriving its key") ||
			!strings.Contains(logs.String(), "lifeboat key remove "+id.Short()) {
			t.Fatalf("no warning naming forged key file %s and what to do:\n%s", id.Short(), logs)
		}
	}
	if !strings.Contains(logs.String(), "16 passes over 1048576 KiB") {
		t.Fatalf("the warning does not say which parameters were refused:\n%s", logs)
	}

	_, n, err = openCounting(t, tr, []byte("wrong"), "")
	if !errors.Is(err, crypt.ErrWrongPassword) || n != 1 || !strings.Contains(err.Error(), "5 not tried") {
		t.Fatalf("wrong password: %v after %d derivations; want ErrWrongPassword naming 5 key files not tried, after 1", err, n)
	}
	// A hint that names only a key file beyond even the older bounds
	// (64 passes over 4 GiB): no derivation, and the error names it.
	_, n, err = openCounting(t, tr, testPassword, forged[4].String()[:12])
	if !errors.Is(err, ErrNoUsableKey) || n != 0 || !strings.Contains(err.Error(), forged[4].Short()) {
		t.Fatalf("hint naming a forged key file beyond the older bounds: %v after %d derivations", err, n)
	}

	keys, err := r.Keys(ctx)
	must(t, err)
	notTried := 0
	for _, k := range keys {
		if k.Error != "" {
			notTried++
		}
	}
	if notTried != len(forged) {
		t.Fatalf("key list marks %d key files as not tried, want %d: %+v", notTried, len(forged), keys)
	}
	for _, id := range forged {
		k, err := r.FindKey(ctx, id.Short())
		must(t, err)
		must(t, r.RemoveKey(ctx, k.ID))
	}
	logs.Reset()
	_, n, err = openCounting(t, tr, testPassword, "")
	if err != nil || n != 1 || logs.Len() != 0 {
		t.Fatalf("after removing the forged key files: %v, %d derivations, warnings %q", err, n, logs)
	}
}

// Forged key files at the documented bound are accepted (listed, no
// warning) but tried only after the user's cheaper key: still one
// derivation.
func TestForgedKeyFilesAtBoundTriedLast(t *testing.T) {
	ctx := context.Background()
	tr := newTestRepo(t)
	real := keyFileIDs(t, tr.be)[0]
	forgeKeyFiles(t, tr.be, real, 3, crypt.MaxKDFTime, crypt.MaxKDFMemoryKiB, nil)
	logs := captureWarnings(tr)
	r, n, err := openCounting(t, tr, testPassword, "")
	must(t, err)
	if n != 1 || r.KeyID() != real {
		t.Fatalf("opened with %s after %d derivations; want %s after 1", r.KeyID().Short(), n, real.Short())
	}
	if logs.Len() != 0 {
		t.Fatalf("warnings about key files within the bounds: %s", logs)
	}
	keys, err := r.Keys(ctx)
	must(t, err)
	for _, k := range keys {
		if k.Error != "" {
			t.Fatalf("a key file at the bound is listed as not usable: %+v", k)
		}
	}
}

// Key files are tried cheapest first and, at equal cost, newest first.
func TestKeyOrderCheapestThenNewest(t *testing.T) {
	ctx := context.Background()
	tr := newTestRepo(t)
	now := time.Now()
	r, err := Open(ctx, tr.be, testPassword, Options{CacheDir: tr.cache, NoIndexDB: true, Now: func() time.Time { return now.Add(time.Hour) }})
	must(t, err)
	t.Cleanup(func() { _ = r.Close(ctx) })
	_, err = r.AddKey(ctx, []byte("newer"), blob.Tiers, testKDF())
	must(t, err)
	_, err = r.AddKey(ctx, []byte("cheaper"), blob.Tiers, crypt.NewKDFParams(1, 32, 1))
	must(t, err)
	for pw, want := range map[string]uint64{"cheaper": 1, "newer": 2, string(testPassword): 3} {
		if _, n, err := openCounting(t, tr, []byte(pw), ""); err != nil || n != want {
			t.Fatalf("password %q: %v after %d derivations, want %d", pw, err, n, want)
		}
	}
}

// olderKeyFile makes a key file the way a Lifeboat before the new bounds
// did (docs/format.md 4.2 and 4.3), with 12 passes: beyond today's bound
// of 8, within the older one of 16.
func olderKeyFile(t *testing.T, r *Repository, password []byte) []byte {
	t.Helper()
	kdf := crypt.NewKDFParams(12, 64, 1)
	kf := crypt.KeyFile{Version: 1, Created: time.Now().UTC(), Hostname: "old", Tiers: blob.Tiers, KDF: kdf}
	mat := map[string]map[string]map[string][]byte{"tiers": {}}
	repoID := r.Config().ID
	aad := append([]byte("lifeboat-key-v1\x00"), repoID[:]...)
	for _, tier := range blob.Tiers {
		k, err := r.TierKeys(tier)
		must(t, err)
		mat["tiers"][tier.String()] = map[string][]byte{"enc": k.Enc[:], "id": k.IDKey[:]}
		aad = append(aad, byte(tier))
	}
	for _, f := range []string{kf.Created.Format(time.RFC3339Nano), kf.Hostname, kf.Username} {
		aad = binary.LittleEndian.AppendUint16(aad, uint16(len(f)))
		aad = append(aad, f...)
	}
	plain, err := json.Marshal(mat)
	must(t, err)
	kek := crypt.Key(argon2.IDKey(password, kdf.Salt, kdf.Time, kdf.MemoryKiB, kdf.Threads, crypt.KeySize))
	kf.Data = crypt.NewSealer(kek).Seal(nil, plain, aad)
	data, err := json.Marshal(kf)
	must(t, err)
	return data
}

// A key an older Lifeboat made beyond today's bounds is not tried without
// a hint (the error and the warning say how to open it), opens when
// --key-hint names it alone, and `key passwd` then gives it parameters
// within the bounds.
func TestOlderKeyBeyondBoundsOpensByHint(t *testing.T) {
	ctx := context.Background()
	tr, r := openNewTestRepo(t)
	pw := []byte("old password")
	data := olderKeyFile(t, r, pw)
	old := blob.ID(blake3.Sum256(data))
	must(t, tr.be.Save(ctx, backend.Handle{Type: backend.Key, Name: old.String()}, data))
	logs := captureWarnings(tr)

	_, n, err := openCounting(t, tr, pw, "")
	if !errors.Is(err, crypt.ErrWrongPassword) || n != 1 || !strings.Contains(logs.String(), "--key-hint "+old.String()) {
		t.Fatalf("older key without a hint: %v after %d derivations; warnings %s", err, n, logs)
	}
	r2, n, err := openCounting(t, tr, pw, old.String()[:16])
	must(t, err)
	if n != 1 || r2.KeyID() != old {
		t.Fatalf("older key by hint: key %s after %d derivations", r2.KeyID().Short(), n)
	}
	keys, err := r2.Keys(ctx)
	must(t, err)
	for _, k := range keys {
		if k.ID == old && (!k.Current || len(k.Tiers) != 2 || !strings.Contains(k.Error, "--key-hint")) {
			t.Fatalf("older key listed as %+v", k)
		}
	}
	// Not removable as if it were junk: it is the key in use.
	if err := r2.RemoveKey(ctx, old); !errors.Is(err, ErrKeyInUse) {
		t.Fatalf("removing the older key in use: %v", err)
	}
	renewed, err := r2.ChangePassword(ctx, pw, testKDF())
	must(t, err)
	r3, n, err := openCounting(t, tr, pw, "")
	must(t, err)
	if r3.KeyID() != renewed || n != 1 {
		t.Fatalf("after key passwd: key %s after %d derivations", r3.KeyID().Short(), n)
	}
}
