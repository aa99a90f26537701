package bench

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // real SQLite files without cgo (already a dependency of profile/)

	"lifeboat/profile/fixture"
)

// Paths of the parts generateMix writes, relative to the corpus root.
const (
	GitPackRel = ".git/objects/pack/pack-0001.pack"
	RecordRel  = "data/events.dat"
	dbDir      = "data/db"
	blobDir    = "blobs"
)

type writeFunc func(rel string, data []byte, mode os.FileMode) error

// generateMix writes the parts of the benchmark mix beyond the original
// corpus: the git-like pack, the blobs, the record file, the databases
// and the browser profile. Every byte comes from rng (or, for SQLite and
// the profile, from statements driven by it), so a seed fixes the result.
func generateMix(dir string, seed uint64, rng *rand.Rand, s Scale, write writeFunc) error {
	if s.GitPackMiB > 0 {
		if err := write(GitPackRel, gitPack(rng, s.GitPackMiB<<20), 0o444); err != nil {
			return err
		}
	}
	for i, mib := range s.BlobsMiB {
		if err := write(fmt.Sprintf("%s/archive-%d.tar.zst", blobDir, i), randomBytes(rng, mib<<20), 0o644); err != nil {
			return err
		}
	}
	if s.RecordMiB > 0 {
		if err := write(RecordRel, records(rng, s.RecordMiB<<20), 0o644); err != nil {
			return err
		}
	}
	ctx := context.Background()
	for i := range s.Databases {
		p := filepath.Join(dir, dbDir, fmt.Sprintf("app%d.sqlite", i))
		if err := writeDatabase(ctx, p, rng, s.DBRows); err != nil {
			return fmt.Errorf("database %s: %w", p, err)
		}
	}
	if s.Profile {
		udd := filepath.Join(dir, filepath.FromSlash(ProfileRel))
		if err := os.MkdirAll(filepath.Dir(udd), 0o700); err != nil {
			return err
		}
		// No WAL: its header holds random salts, and the same seed must
		// give the same bytes.
		if err := CorpusProfile(seed, s).Write(ctx, udd, fixture.Options{}); err != nil {
			return fmt.Errorf("browser profile: %w", err)
		}
		if s.LocalStorage != nil {
			// leveldb's info log holds wall-clock times: give it fixed text.
			log := filepath.Join(udd, fixture.Profile, "Local Storage", "leveldb", "LOG")
			if err := os.WriteFile(log, []byte("bench corpus: leveldb log\n"), 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// CorpusProfile is the browser profile a corpus of seed and s holds
// (when s.Profile): its Check confirms a restored copy.
func CorpusProfile(seed uint64, s Scale) *fixture.Fixture {
	f := fixture.New(seed ^ 0x9e3779b97f4a7c15)
	f.LocalStorage = s.LocalStorage
	return f
}

// randomBytes returns n incompressible bytes.
func randomBytes(rng *rand.Rand, n int) []byte {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], rng.Uint64())
	binary.LittleEndian.PutUint64(seed[8:], rng.Uint64())
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(seed).Read(b) // never fails
	return b
}

// gitPack returns n bytes shaped like a git pack: a header, then objects
// of a type-and-size header, a 20-byte id and a body of mostly text with
// binary runs, which compresses about 2-3x.
func gitPack(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+64<<10)
	b = append(b, "PACK\x00\x00\x00\x02"...)
	for len(b) < n {
		size := 256 + rng.IntN(32<<10)
		b = append(b, byte(1+rng.IntN(4)))
		b = binary.AppendUvarint(b, uint64(size))
		b = append(b, randomBytes(rng, 20)...)
		if rng.IntN(4) == 0 {
			b = append(b, randomBytes(rng, size/2)...)
			b = append(b, sourceText(rng, size-size/2)...)
		} else {
			b = append(b, sourceText(rng, size)...)
		}
	}
	return b[:n]
}

// records returns n bytes of 64-byte records: a counter, a random key and
// a repetitive payload, like an event or metrics file.
func records(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+64)
	for i := uint64(0); len(b) < n; i++ {
		b = appendRecord(b, rng, i)
	}
	return b[:n]
}

func appendRecord(b []byte, rng *rand.Rand, i uint64) []byte {
	b = binary.LittleEndian.AppendUint64(b, i)
	b = binary.LittleEndian.AppendUint64(b, rng.Uint64())
	return append(b, "event=write status=ok path=/workspace/src/\x00\x00\x00\x00\x00"...)
}

// dbDSN opens the SQLite file p read-write with a rollback journal that
// is deleted at commit, so nothing but the database file stays behind.
func dbDSN(p string) string {
	u := url.URL{Scheme: "file", Path: p}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(DELETE)")
	q.Add("_pragma", "busy_timeout(0)")
	u.RawQuery = q.Encode()
	return u.String()
}

// writeDatabase creates an SQLite database of rows rows at p.
func writeDatabase(ctx context.Context, p string, rng *rand.Rand, rows int) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", dbDSN(p))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, body BLOB NOT NULL, rev INTEGER NOT NULL);
		CREATE INDEX items_name ON items(name);`); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	for i := range rows {
		if _, err := tx.ExecContext(ctx, "INSERT INTO items (id, name, body, rev) VALUES (?, ?, ?, 0)",
			i+1, string(sourceText(rng, 24)), dbBody(rng)); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return db.Close()
}

// dbBody is a row's payload: text with a random tail, about 2 KiB.
func dbBody(rng *rand.Rand) []byte {
	return append(sourceText(rng, 1500+rng.IntN(1000)), randomBytes(rng, 64)...)
}
