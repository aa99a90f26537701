package profile

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Fixture is a deterministic Chromium browser session: known cookies,
// localStorage entries and saved logins, written as a realistic
// user-data-dir by Write and confirmed in a restored copy by Check. Tests
// and bench/ use it; the values carry no real credentials.
type Fixture struct {
	Seed    uint64
	Cookies []FixtureCookie
	Storage []FixtureStorage
	Logins  []FixtureLogin
	// WALCookie is committed only to Cookies-wal when written with
	// FixtureOptions.WAL: it survives a capture only if the WAL is
	// checkpointed first.
	WALCookie FixtureCookie
}

// FixtureCookie is one cookie.
type FixtureCookie struct{ Host, Name, Value string }

// FixtureStorage is one localStorage entry.
type FixtureStorage struct{ Origin, Key, Value string }

// FixtureLogin is one saved password.
type FixtureLogin struct{ Origin, Username, Password string }

// FixtureOptions vary how a fixture is written.
type FixtureOptions struct {
	// WAL leaves the Cookies database in WAL mode with WALCookie committed
	// to Cookies-wal and not checkpointed, as after a browser crash.
	WAL bool
	// LockPID, when set, makes SingletonLock name this process on this
	// host, so the profile looks in use when that process is alive.
	// Otherwise it names a process of another host (a stale lock).
	LockPID int
}

// FixtureProfile is the profile folder the fixture writes.
const FixtureProfile = "Default"

// FixtureDropped are the fixture's paths that capture must leave out
// (caches, metrics, locks): none may be in a restored copy.
var FixtureDropped = []string{
	"Default/Cache", "Default/Code Cache", "Default/GPUCache", "Default/DawnWebGPUCache",
	"Default/Service Worker/CacheStorage", "ShaderCache", "GrShaderCache", "Crashpad", "BrowserMetrics",
	"component_crx_cache", "SingletonLock", "SingletonSocket", "SingletonCookie",
}

// NewFixture derives a fixture's values from seed: the same seed gives
// the same values.
func NewFixture(seed uint64) *Fixture {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	tok := func(what string) string {
		return fmt.Sprintf("lbfx-%s-%016x%016x", what, rng.Uint64(), rng.Uint64())
	}
	f := &Fixture{Seed: seed}
	hosts := []string{".example.com", "app.example.org", ".bank.test"}
	for i, h := range hosts {
		f.Cookies = append(f.Cookies, FixtureCookie{h, fmt.Sprintf("session%d", i), tok("cookie")})
	}
	f.WALCookie = FixtureCookie{".late.example.net", "wal_only", tok("walcookie")}
	for i, o := range []string{"https://app.example.org", "https://mail.example.com"} {
		f.Storage = append(f.Storage, FixtureStorage{o, fmt.Sprintf("token%d", i), tok("storage")})
	}
	for i, o := range []string{"https://login.example.com/", "https://bank.test/signin"} {
		f.Logins = append(f.Logins, FixtureLogin{o, fmt.Sprintf("user%d@example.com", i), tok("password")})
	}
	return f
}

// Secrets are the byte strings that must never leave the sensitive tier:
// every cookie value, storage value and password in clear, and the
// encrypted forms the profile stores.
func (f *Fixture) Secrets() [][]byte {
	var out [][]byte
	for _, c := range append(append([]FixtureCookie{}, f.Cookies...), f.WALCookie) {
		out = append(out, []byte(c.Value), encryptV10(cookiePlain(c.Host, c.Value)))
	}
	for _, s := range f.Storage {
		out = append(out, []byte(s.Value))
	}
	for _, l := range f.Logins {
		out = append(out, []byte(l.Password), encryptV10([]byte(l.Password)))
	}
	return out
}

// Write creates the user-data-dir dir (which must not exist) holding the
// session: Local State; Default/ with Preferences (exit_type "Crashed", as
// after a kill), Secure Preferences, Network/Cookies, Login Data, Web
// Data, Local Storage/leveldb, Sessions, Network state files; plus caches,
// metrics and Singleton files that capture must leave out.
func (f *Fixture) Write(ctx context.Context, dir string, o FixtureOptions) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	prof := filepath.Join(dir, FixtureProfile)
	files := map[string]any{
		"Local State": map[string]any{"profile": map[string]any{"info_cache": map[string]any{FixtureProfile: map[string]any{"name": "Person 1"}},
			"last_used": FixtureProfile}, "os_crypt": map[string]any{"portal": map[string]any{}}},
		"Default/Preferences": map[string]any{"profile": map[string]any{"exit_type": "Crashed", "exited_cleanly": false, "name": "Person 1"},
			"lifeboat_fixture": map[string]any{"seed": f.Seed}, "big_number": json.Number("13380000000000000001")},
		"Default/Secure Preferences": map[string]any{"protection": map[string]any{"macs": map[string]any{}}},
	}
	for rel, v := range files {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, rel), b); err != nil {
			return err
		}
	}
	raw := map[string]string{
		"Default/Network/TransportSecurity":            `{"sts":[],"version":2}`,
		"Default/Network/Network Persistent State":     `{"net":{"http_server_properties":{"servers":[],"version":5}}}`,
		"Default/Sessions/Session_13380000000000000":   "SNSS fixture session",
		"Default/Cache/Cache_Data/data_0":              "cache block",
		"Default/Cache/Cache_Data/index":               "cache index",
		"Default/Code Cache/js/index":                  "code cache",
		"Default/GPUCache/data_0":                      "gpu cache",
		"Default/DawnWebGPUCache/data_0":               "dawn cache",
		"Default/Service Worker/CacheStorage/ab/index": "cache storage",
		"ShaderCache/data_0":                           "shader cache",
		"GrShaderCache/data_0":                         "skia cache",
		"Crashpad/settings.dat":                        "crashpad",
		"BrowserMetrics/BrowserMetrics-1.pma":          "metrics",
		"component_crx_cache/metadata.json":            "{}",
	}
	for rel, s := range raw {
		if err := writeFile(filepath.Join(dir, rel), []byte(s)); err != nil {
			return err
		}
	}
	lock := "lifeboat-fixture-elsewhere-4242"
	if o.LockPID > 0 {
		host, _ := os.Hostname()
		lock = fmt.Sprintf("%s-%d", host, o.LockPID)
	}
	for name, target := range map[string]string{"SingletonLock": lock, "SingletonSocket": "/tmp/.org.chromium.Chromium.fixture/SingletonSocket", "SingletonCookie": "4242424242"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	if err := f.writeCookies(ctx, filepath.Join(prof, "Network", "Cookies"), o.WAL); err != nil {
		return fmt.Errorf("fixture Cookies: %w", err)
	}
	if err := f.writeLogins(ctx, filepath.Join(prof, "Login Data")); err != nil {
		return fmt.Errorf("fixture Login Data: %w", err)
	}
	if err := writeDB(ctx, filepath.Join(prof, "Web Data"), false, []string{webDataSchema}); err != nil {
		return fmt.Errorf("fixture Web Data: %w", err)
	}
	if err := f.writeStorage(filepath.Join(prof, "Local Storage", "leveldb")); err != nil {
		return fmt.Errorf("fixture Local Storage: %w", err)
	}
	return nil
}

func writeFile(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o600)
}

// Check confirms that the user-data-dir dir (a restored copy) holds every
// cookie (the WAL cookie too when wal), storage entry and login of f with
// its value, that Preferences has a clean exit, and that none of
// FixtureDropped is there. Errors name what is missing, never a value.
func (f *Fixture) Check(ctx context.Context, dir string, wal bool) error {
	prof := filepath.Join(dir, FixtureProfile)
	want := f.Cookies
	if wal {
		want = append(append([]FixtureCookie{}, want...), f.WALCookie)
	}
	if err := checkCookies(ctx, filepath.Join(prof, "Network", "Cookies"), want); err != nil {
		return err
	}
	if err := checkLogins(ctx, filepath.Join(prof, "Login Data"), f.Logins); err != nil {
		return err
	}
	if err := checkStorage(filepath.Join(prof, "Local Storage", "leveldb"), f.Storage); err != nil {
		return err
	}
	var prefs struct {
		Profile struct {
			ExitType      string `json:"exit_type"`
			ExitedCleanly bool   `json:"exited_cleanly"`
		} `json:"profile"`
	}
	b, err := os.ReadFile(filepath.Join(prof, "Preferences"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &prefs); err != nil {
		return fmt.Errorf("fixture check: Preferences: %w", err)
	}
	if prefs.Profile.ExitType != "Normal" || !prefs.Profile.ExitedCleanly {
		return fmt.Errorf("fixture check: Preferences: exit_type %q exited_cleanly %v, want Normal and true", prefs.Profile.ExitType, prefs.Profile.ExitedCleanly)
	}
	for _, rel := range FixtureDropped {
		if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
			return fmt.Errorf("%s is in the restored profile; it must be left out", rel)
		}
	}
	if _, err := os.Lstat(filepath.Join(prof, "Network", "Cookies-wal")); err == nil {
		return fmt.Errorf("fixture check: Network/Cookies-wal is in the restored profile; stale SQLite side files must be removed")
	}
	return nil
}

// openDB opens an SQLite file for the fixture or the checker.
func openDB(ctx context.Context, p string, ro bool) (*sql.DB, *sql.Conn, error) {
	db, err := sql.Open("sqlite", sqliteDSN(p, ro))
	if err != nil {
		return nil, nil, err
	}
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, c, nil
}

// writeDB creates an SQLite database at p and runs stmts in it.
func writeDB(ctx context.Context, p string, wal bool, stmts []string, args ...[]any) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	db, c, err := openDB(ctx, p, false)
	if err != nil {
		return err
	}
	defer db.Close()
	defer c.Close()
	mode := "TRUNCATE"
	if wal {
		mode = "WAL"
	}
	if _, err := c.ExecContext(ctx, "PRAGMA journal_mode="+mode); err != nil {
		return err
	}
	for i, s := range stmts {
		var a []any
		if i < len(args) {
			a = args[i]
		}
		if _, err := c.ExecContext(ctx, s, a...); err != nil {
			return fmt.Errorf("%.40s: %w", s, err)
		}
	}
	return nil
}
