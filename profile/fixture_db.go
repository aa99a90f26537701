package profile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// Schemas of the fixture's databases: Chromium's (cookie DB version 24,
// logins version 40), trimmed to the columns the checker reads plus the
// NOT NULL ones.
const (
	cookiesSchema = `CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE cookies(creation_utc INTEGER NOT NULL, host_key TEXT NOT NULL, top_frame_site_key TEXT NOT NULL, name TEXT NOT NULL,
 value TEXT NOT NULL, encrypted_value BLOB NOT NULL, path TEXT NOT NULL, expires_utc INTEGER NOT NULL, is_secure INTEGER NOT NULL,
 is_httponly INTEGER NOT NULL, last_access_utc INTEGER NOT NULL, has_expires INTEGER NOT NULL, is_persistent INTEGER NOT NULL,
 priority INTEGER NOT NULL, samesite INTEGER NOT NULL, source_scheme INTEGER NOT NULL, source_port INTEGER NOT NULL,
 last_update_utc INTEGER NOT NULL, source_type INTEGER NOT NULL, has_cross_site_ancestor INTEGER NOT NULL);
CREATE UNIQUE INDEX cookies_unique_index ON cookies(host_key, top_frame_site_key, has_cross_site_ancestor, name, path, source_scheme, source_port);
INSERT INTO meta VALUES('version','24'),('last_compatible_version','24');`
	cookieInsert = `INSERT INTO cookies VALUES(13380000000000000, ?, '', ?, '', ?, '/', 13390000000000000, 1, 1, 13380000000000000, 1, 1, 1, 0, 2, 443, 13380000000000000, 0, 0)`
	loginsSchema = `CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE logins (origin_url VARCHAR NOT NULL, action_url VARCHAR, username_element VARCHAR, username_value VARCHAR,
 password_element VARCHAR, password_value BLOB, submit_element VARCHAR, signon_realm VARCHAR NOT NULL, date_created INTEGER NOT NULL,
 blacklisted_by_user INTEGER NOT NULL, scheme INTEGER NOT NULL, password_type INTEGER, times_used INTEGER, form_data BLOB,
 display_name VARCHAR, icon_url VARCHAR, federation_url VARCHAR, skip_zero_click INTEGER, generation_upload_status INTEGER,
 possible_username_pairs BLOB, id INTEGER PRIMARY KEY AUTOINCREMENT, date_last_used INTEGER NOT NULL DEFAULT 0,
 moving_blocked_for BLOB, date_password_modified INTEGER NOT NULL DEFAULT 0,
 UNIQUE (origin_url, username_element, username_value, password_element, signon_realm));
INSERT INTO meta VALUES('version','40'),('last_compatible_version','40');`
	loginInsert   = `INSERT INTO logins(origin_url, action_url, username_element, username_value, password_element, password_value, signon_realm, date_created, blacklisted_by_user, scheme) VALUES(?, ?, 'email', ?, 'password', ?, ?, 13380000000000000, 0, 0)`
	webDataSchema = `CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE autofill (name VARCHAR, value VARCHAR, value_lower VARCHAR, date_created INTEGER DEFAULT 0, date_last_used INTEGER DEFAULT 0, count INTEGER DEFAULT 1, PRIMARY KEY (name, value));
INSERT INTO meta VALUES('version','122');`
)

func (f *Fixture) writeCookies(ctx context.Context, p string, wal bool) error {
	stmts, args := []string{cookiesSchema}, [][]any{nil}
	for _, c := range f.Cookies {
		stmts = append(stmts, cookieInsert)
		args = append(args, []any{c.Host, c.Name, encryptV10(cookiePlain(c.Host, c.Value))})
	}
	if !wal {
		return writeDB(ctx, p, false, stmts, args...)
	}
	// Build the database elsewhere, commit the last cookie to the WAL
	// only, and copy the database and its WAL while the connection is
	// still open (closing would checkpoint): the state a crash leaves.
	tmp, err := os.MkdirTemp("", "lifeboat-fixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "Cookies")
	if err := writeDB(ctx, src, true, stmts, args...); err != nil {
		return err
	}
	db, c, err := openDB(ctx, src, false)
	if err != nil {
		return err
	}
	defer db.Close()
	defer c.Close()
	if _, err := c.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0"); err != nil {
		return err
	}
	w := f.WALCookie
	if _, err := c.ExecContext(ctx, cookieInsert, w.Host, w.Name, encryptV10(cookiePlain(w.Host, w.Value))); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	for _, s := range []string{"", "-wal"} {
		b, err := os.ReadFile(src + s)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p+s, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fixture) writeLogins(ctx context.Context, p string) error {
	stmts, args := []string{loginsSchema}, [][]any{nil}
	for _, l := range f.Logins {
		stmts = append(stmts, loginInsert)
		args = append(args, []any{l.Origin, l.Origin, l.Username, encryptV10([]byte(l.Password)), l.Origin})
	}
	return writeDB(ctx, p, false, stmts, args...)
}

// Local Storage keys as Chromium writes them: "VERSION", "META:<origin>",
// and "_<origin>\x00<key>" for data, where key and value start with a
// byte giving their encoding (1: Latin-1).
func storageKey(origin, key string) []byte {
	return []byte("_" + origin + "\x00\x01" + key)
}

func (f *Fixture) writeStorage(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	db, err := leveldb.OpenFile(dir, &opt.Options{ErrorIfExist: true})
	if err != nil {
		return err
	}
	b := new(leveldb.Batch)
	b.Put([]byte("VERSION"), []byte("1"))
	for _, s := range f.Storage {
		b.Put([]byte("META:"+s.Origin), []byte{0x08, 0x01, 0x10, byte(len(s.Value))})
		b.Put(storageKey(s.Origin, s.Key), append([]byte{1}, s.Value...))
	}
	if err := db.Write(b, &opt.WriteOptions{Sync: true}); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

func checkCookies(ctx context.Context, p string, want []FixtureCookie) error {
	db, c, err := openDB(ctx, p, true)
	if err != nil {
		return err
	}
	defer db.Close()
	defer c.Close()
	for _, w := range want {
		var enc []byte
		err := c.QueryRowContext(ctx, "SELECT encrypted_value FROM cookies WHERE host_key = ? AND name = ?", w.Host, w.Name).Scan(&enc)
		if err != nil {
			return fmt.Errorf("fixture check: Cookies: cookie %s on %s: %w", w.Name, w.Host, err)
		}
		plain, err := decryptV10(enc)
		if err != nil {
			return fmt.Errorf("fixture check: Cookies: cookie %s on %s: %w", w.Name, w.Host, err)
		}
		h := sha256.Sum256([]byte(w.Host))
		if !bytes.Equal(plain, append(h[:], w.Value...)) {
			return fmt.Errorf("fixture check: Cookies: cookie %s on %s has another value", w.Name, w.Host)
		}
	}
	return nil
}

func checkLogins(ctx context.Context, p string, want []FixtureLogin) error {
	db, c, err := openDB(ctx, p, true)
	if err != nil {
		return err
	}
	defer db.Close()
	defer c.Close()
	for _, w := range want {
		var enc []byte
		err := c.QueryRowContext(ctx, "SELECT password_value FROM logins WHERE origin_url = ? AND username_value = ?", w.Origin, w.Username).Scan(&enc)
		if err != nil {
			return fmt.Errorf("fixture check: Login Data: login %s at %s: %w", w.Username, w.Origin, err)
		}
		plain, err := decryptV10(enc)
		if err != nil || string(plain) != w.Password {
			return fmt.Errorf("fixture check: Login Data: login %s at %s has another password", w.Username, w.Origin)
		}
	}
	return nil
}

// checkStorage reads a copy of the LevelDB folder, so the restored
// profile is not changed by opening it.
func checkStorage(dir string, want []FixtureStorage) error {
	tmp, err := os.MkdirTemp("", "lifeboat-fixture-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("fixture check: Local Storage: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	db, err := leveldb.OpenFile(tmp, &opt.Options{ErrorIfMissing: true})
	if err != nil {
		return fmt.Errorf("fixture check: Local Storage: opening the LevelDB: %w", err)
	}
	defer db.Close()
	for _, w := range want {
		v, err := db.Get(storageKey(w.Origin, w.Key), nil)
		if err != nil {
			return fmt.Errorf("fixture check: Local Storage: %s key %s: %w", w.Origin, w.Key, err)
		}
		if !bytes.Equal(v, append([]byte{1}, w.Value...)) {
			return fmt.Errorf("fixture check: Local Storage: %s key %s has another value", w.Origin, w.Key)
		}
	}
	return nil
}
