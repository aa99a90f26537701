package profile

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/proctest"
	"lifeboat/internal/seedtest"
	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
)

// testFixture returns a fixture of a logged seed.
func testFixture(t *testing.T) *fixture.Fixture {
	t.Helper()
	return localstorage.New(seedtest.Seed(t))
}

func writeFixture(t *testing.T, f *fixture.Fixture, dir string, o fixture.Options) {
	t.Helper()
	if err := f.Write(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
}

// copyKept copies what the rule table keeps of p to dst, as a capture and
// restore would.
func copyKept(t *testing.T, p Profile, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	err := walkKept(p, func(rel, abs string, d fs.DirEntry) error {
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(out, 0o700)
		case d.Type().IsRegular():
			b, err := os.ReadFile(abs)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o600)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// restoredChromium writes f as the Chromium profile "chrome" and copies
// what a capture keeps of it to a new staging directory, as a restore
// would: it returns the staging directory and the profile in it.
func restoredChromium(t *testing.T, f *fixture.Fixture) (staging, restored string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, f, src, fixture.Options{})
	staging = t.TempDir()
	restored = filepath.Join(staging, "chrome")
	copyKept(t, Profile{Dir: src, Rel: "chrome", Kind: Chromium}, restored)
	return staging, restored
}

func TestDecide(t *testing.T) {
	cases := []struct {
		k    Kind
		rel  string
		want Action
	}{
		{Chromium, "Local State", Keep},
		{Chromium, "Default/Preferences", Keep},
		{Chromium, "Default/Network/Cookies", Keep},
		{Chromium, "Profile 1/Login Data", Keep},
		{Chromium, "Default/Local Storage/leveldb/CURRENT", Keep},
		{Chromium, "Default/Service Worker/Database/CURRENT", Keep},
		{Chromium, "Default/Service Worker/CacheStorage", Skip},
		{Chromium, "Default/Service Worker/CacheStorage/ab/index", Skip},
		{Chromium, "Default/Cache", Skip},
		{Chromium, "Default/Code Cache/js/index", Skip},
		{Chromium, "GrShaderCache", Skip},
		{Chromium, "GPUPersistentCache/data_0", Skip},
		{Chromium, "extensions_crx_cache/abc.crx", Skip},
		{Chromium, "Default/AutofillAiModelCache/model", Skip},
		{Chromium, "Default/optimization_guide_hint_cache_store/CURRENT", Skip},
		{Chromium, "Crashpad/settings.dat", Skip},
		{Chromium, "SingletonLock", Never},
		{Chromium, "SingletonCookie", Never},
		{Chromium, "Default/Network/Cookies-wal", Skip},
		{Chromium, "Default/Network/Cookies-journal", Skip},
		{Chromium, "Default/Some New State", Keep},
		{Firefox, "profiles.ini", Keep},
		{Firefox, "abc.default/cookies.sqlite", Keep},
		{Firefox, "abc.default/storage/default/https+++x/ls/data.sqlite", Keep},
		{Firefox, "abc.default/cache2/entries/x", Skip},
		{Firefox, "abc.default/lock", Never},
		{Firefox, "abc.default/.parentlock", Never},
		{Firefox, "abc.default/places.sqlite-wal", Skip},
	}
	for _, c := range cases {
		if got, _ := Decide(c.k, c.rel); got != c.want {
			t.Errorf("%s %q: %v, want %v", c.k, c.rel, got, c.want)
		}
	}
}

// TestRulesDocumented: docs/profiles.md lists every rule of the table.
func TestRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/profiles.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Rules {
		line := "| " + string(r.Kind) + " | `" + r.Pattern + "` | " + r.Action.String() + " |"
		if !bytes.Contains(doc, []byte(line)) {
			t.Errorf("docs/profiles.md lacks the row %q", line)
		}
	}
}

func TestDiscoverAndResolve(t *testing.T) {
	ws := t.TempDir()
	f := testFixture(t)
	chrome := filepath.Join(ws, "home", ".config", "chromium")
	if err := os.MkdirAll(filepath.Dir(chrome), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFixture(t, f, chrome, fixture.Options{})
	ff := filepath.Join(ws, "home", ".mozilla", "firefox")
	for rel, s := range map[string]string{"profiles.ini": "[Profile0]\nPath=abc.default\n", "abc.default/prefs.js": "//", "abc.default/cookies.sqlite": ""} {
		p := filepath.Join(ff, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, f, outside, fixture.Options{})
	if err := os.Symlink(outside, filepath.Join(ws, "linked-profile")); err != nil {
		t.Fatal(err)
	}
	got, err := Discover(ws)
	if err != nil {
		t.Fatal(err)
	}
	want := []Profile{{Dir: chrome, Rel: "home/.config/chromium", Kind: Chromium}, {Dir: ff, Rel: "home/.mozilla/firefox", Kind: Firefox}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Discover: %+v, want %+v", got, want)
	}
	// A workspace root that is itself a symlink is searched.
	rootLink := filepath.Join(t.TempDir(), "wslink")
	must(t, os.Symlink(ws, rootLink))
	if got, err := Discover(rootLink); err != nil || len(got) != 2 || got[0].Rel != want[0].Rel || got[0].Dir != filepath.Join(rootLink, want[0].Rel) {
		t.Fatalf("Discover through a root symlink: %+v %v", got, err)
	}
	if p, err := Resolve(ws, chrome); err != nil || p != want[0] {
		t.Fatalf("Resolve: %+v %v", p, err)
	}
	for dir, msg := range map[string]string{
		filepath.Join(ws, "linked-profile"): "symlink",
		filepath.Join(chrome, "Default"):    "user-data-dir",
		filepath.Join(ws, "home"):           "no Local State",
		outside:                             "not below the workspace",
		ws:                                  "not below the workspace",
		filepath.Join(ws, "linked-profile", "..."): "symlink",
	} {
		_, err := Resolve(ws, dir)
		if !errors.Is(err, ErrNotProfile) || !strings.Contains(err.Error(), msg) {
			t.Errorf("Resolve(%s): %v, want %q", dir, err, msg)
		}
	}
}

func TestRunningChromium(t *testing.T) {
	f := testFixture(t)
	dir := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, f, dir, fixture.Options{LockPID: os.Getpid()})
	p := Profile{Dir: dir, Rel: "chrome", Kind: Chromium}
	_, err := Prepare(context.Background(), &p)
	var re *RunningError
	if !errors.Is(err, ErrBrowserRunning) || !errors.As(err, &re) || re.Dir != dir {
		t.Fatalf("Prepare of a running profile: %v", err)
	}
	host, _ := os.Hostname()
	for _, lock := range []string{host + "-" + itoa(proctest.DeadPID(t)), "otherhost-" + itoa(os.Getpid()), "garbage"} {
		_ = os.Remove(filepath.Join(dir, "SingletonLock"))
		if err := os.Symlink(lock, filepath.Join(dir, "SingletonLock")); err != nil {
			t.Fatal(err)
		}
		if err := CheckRunning(p); err != nil {
			t.Errorf("lock %q: %v", lock, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestRunningFirefox(t *testing.T) {
	root := t.TempDir()
	prof := filepath.Join(root, "abc.default")
	if err := os.Mkdir(prof, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "profiles.ini"), []byte("[Profile0]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := Profile{Dir: root, Rel: "ff", Kind: Firefox}
	if err := CheckRunning(p); err != nil {
		t.Fatal(err)
	}
	// .parentlock held with a POSIX record lock, as Firefox holds it.
	lf, err := os.Create(filepath.Join(prof, ".parentlock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(lf.Fd(), unix.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if err := CheckRunning(p); !errors.Is(err, ErrBrowserRunning) {
		t.Fatalf(".parentlock held: %v", err)
	}
	lk.Type = unix.F_UNLCK
	if err := unix.FcntlFlock(lf.Fd(), unix.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if err := CheckRunning(p); err != nil {
		t.Fatalf(".parentlock released: %v", err)
	}
	if err := os.Symlink("127.0.0.1:+"+itoa(os.Getpid()), filepath.Join(prof, "lock")); err != nil {
		t.Fatal(err)
	}
	if err := CheckRunning(p); !errors.Is(err, ErrBrowserRunning) {
		t.Fatalf("lock names a live process: %v", err)
	}
}

func TestPrepareCheckpointsWAL(t *testing.T) {
	ctx := context.Background()
	f := testFixture(t)
	dir := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, f, dir, fixture.Options{WAL: true})
	cookies := filepath.Join(dir, "Default", "Network", "Cookies")
	if fi, err := os.Stat(cookies + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("fixture left no WAL: %v", err)
	}
	// Without the checkpoint the database file alone lacks the WAL cookie.
	alone := filepath.Join(t.TempDir(), "Cookies")
	copyFile(t, cookies, alone)
	if err := fixture.CheckCookies(ctx, alone, []fixture.Cookie{f.WALCookie}); err == nil {
		t.Fatal("the WAL cookie is in the database file before the checkpoint; the fixture does not test it")
	}
	probs, err := Prepare(ctx, &Profile{Dir: dir, Rel: "chrome", Kind: Chromium})
	if err != nil || len(probs) != 0 {
		t.Fatalf("Prepare: %v %v", probs, err)
	}
	copyFile(t, cookies, alone)
	if err := fixture.CheckCookies(ctx, alone, append(f.Cookies, f.WALCookie)); err != nil {
		t.Fatalf("after the checkpoint the database file alone: %v", err)
	}
	if fi, err := os.Stat(cookies + "-wal"); err == nil && fi.Size() != 0 {
		t.Fatalf("WAL still holds %d bytes", fi.Size())
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestFixtureValidateCheck(t *testing.T) {
	ctx := context.Background()
	f := testFixture(t)
	src := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, f, src, fixture.Options{WAL: true})
	p := Profile{Dir: src, Rel: "home/chrome", Kind: Chromium}
	if _, err := Prepare(ctx, &p); err != nil {
		t.Fatal(err)
	}
	staging := t.TempDir()
	copyKept(t, p, filepath.Join(staging, "home", "chrome"))
	// Lock and side files that an older snapshot might hold are removed.
	restored := filepath.Join(staging, "home", "chrome")
	if err := os.Symlink("x-1", filepath.Join(restored, "SingletonLock")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"-wal", "-shm", "-journal"} {
		if err := os.WriteFile(filepath.Join(restored, "Default", "Network", "Cookies"+s), []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Check(ctx, restored, true); err == nil {
		t.Fatal("Check passed before Validate reset the crash state")
	}
	probs, err := Validate(ctx, staging, []Profile{p})
	if err != nil || len(probs) != 0 {
		t.Fatalf("Validate: %v %v", probs, err)
	}
	if err := f.Check(ctx, restored, true); err != nil {
		t.Fatal(err)
	}
	// Other preferences survive the reset, big numbers exactly.
	b, _ := os.ReadFile(filepath.Join(restored, "Default", "Preferences"))
	if !bytes.Contains(b, []byte(`"big_number":13380000000000000001`)) || !bytes.Contains(b, []byte(`"name":"Person 1"`)) {
		t.Fatalf("Preferences lost other settings: %s", b)
	}
}

func TestValidateFlagsDamage(t *testing.T) {
	ctx := context.Background()
	f := testFixture(t)
	staging, dst := restoredChromium(t, f)
	// Cookies: a damaged page (past the header); Login Data: a damaged header;
	// Local Storage: CURRENT names a missing MANIFEST.
	cookies := filepath.Join(dst, "Default", "Network", "Cookies")
	b, _ := os.ReadFile(cookies)
	for i := 4096; i < len(b) && i < 4096+512; i++ {
		b[i] = 0xA5
	}
	if err := os.WriteFile(cookies, b, 0o600); err != nil {
		t.Fatal(err)
	}
	logins := filepath.Join(dst, "Default", "Login Data")
	b, _ = os.ReadFile(logins)
	copy(b, "NOT SQLITE AT ALL")
	if err := os.WriteFile(logins, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "Default", "Local Storage", "leveldb", "CURRENT"), []byte("MANIFEST-999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	probs, err := Validate(ctx, staging, []Profile{{Rel: "chrome", Kind: Chromium}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, pr := range probs {
		got[pr.Path] = pr.What
	}
	if !strings.Contains(got["Default/Network/Cookies"], "integrity") ||
		!strings.Contains(got["Default/Login Data"], "header") ||
		!strings.Contains(got["Default/Local Storage/leveldb"], "MANIFEST-999999") || len(probs) != 3 {
		t.Fatalf("problems: %+v", probs)
	}
	for _, pr := range probs {
		for _, s := range f.Secrets() {
			if bytes.Contains([]byte(pr.What), s) {
				t.Fatalf("problem text carries a secret: %q", pr.What)
			}
		}
	}
}

func TestFixtureDeterministic(t *testing.T) {
	ctx := context.Background()
	a, b := localstorage.New(7), localstorage.New(7)
	da, db := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if err := a.Write(ctx, da, fixture.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(ctx, db, fixture.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"Local State", "Default/Preferences", "Default/Network/Cookies", "Default/Login Data", "Default/Web Data"} {
		x, _ := os.ReadFile(filepath.Join(da, rel))
		y, _ := os.ReadFile(filepath.Join(db, rel))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes of seed 7", rel)
		}
	}
	if localstorage.New(8).Cookies[0].Value == a.Cookies[0].Value {
		t.Error("seeds 7 and 8 give the same cookie")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFirefoxPrepareValidate: a Firefox root whose cookies.sqlite has an
// un-checkpointed WAL, a cache and lock files: the checkpoint folds the WAL
// in, the rules leave cache and locks out, validation passes.
func TestFirefoxPrepareValidate(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "firefox")
	prof := filepath.Join(root, "abc.default-release")
	must(t, os.MkdirAll(filepath.Join(prof, "cache2", "entries"), 0o700))
	must(t, os.WriteFile(filepath.Join(root, "profiles.ini"), []byte("[Profile0]\nPath=abc.default-release\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(prof, "prefs.js"), []byte("// prefs\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(prof, "cache2", "entries", "X"), []byte("cache"), 0o600))
	must(t, os.WriteFile(filepath.Join(prof, ".parentlock"), nil, 0o600))
	must(t, os.Symlink("127.0.0.1:+"+strconv.Itoa(proctest.DeadPID(t)), filepath.Join(prof, "lock")))
	// cookies.sqlite with a row only in its WAL, copied while the writer is open.
	tmp := filepath.Join(t.TempDir(), "cookies.sqlite")
	must(t, fixture.WriteDB(ctx, tmp, true, []string{"CREATE TABLE moz_cookies(name TEXT, value TEXT)", "INSERT INTO moz_cookies VALUES('a', 'in-db')"}))
	db, c, err := fixture.OpenDB(ctx, tmp, false)
	must(t, err)
	_, err = c.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0")
	must(t, err)
	_, err = c.ExecContext(ctx, "INSERT INTO moz_cookies VALUES('b', 'in-wal')")
	must(t, err)
	copyFile(t, tmp, filepath.Join(prof, "cookies.sqlite"))
	copyFile(t, tmp+"-wal", filepath.Join(prof, "cookies.sqlite-wal"))
	c.Close()
	db.Close()

	p := Profile{Dir: root, Rel: "home/.mozilla/firefox", Kind: Firefox}
	if got, err := Discover(filepath.Dir(root)); err != nil || len(got) != 1 || got[0].Kind != Firefox {
		t.Fatalf("Discover: %+v %v", got, err)
	}
	if probs, err := Prepare(ctx, &p); err != nil || len(probs) != 0 {
		t.Fatalf("Prepare: %v %v", probs, err)
	}
	staging := t.TempDir()
	dst := filepath.Join(staging, "home", ".mozilla", "firefox")
	copyKept(t, p, dst)
	for _, rel := range []string{"abc.default-release/cache2", "abc.default-release/.parentlock", "abc.default-release/lock", "abc.default-release/cookies.sqlite-wal"} {
		if _, err := os.Lstat(filepath.Join(dst, rel)); err == nil {
			t.Errorf("%s was kept", rel)
		}
	}
	if probs, err := Validate(ctx, staging, []Profile{p}); err != nil || len(probs) != 0 {
		t.Fatalf("Validate: %v %v", probs, err)
	}
	db, c, err = fixture.OpenDB(ctx, filepath.Join(dst, "abc.default-release", "cookies.sqlite"), true)
	must(t, err)
	defer db.Close()
	defer c.Close()
	var n int
	must(t, c.QueryRowContext(ctx, "SELECT count(*) FROM moz_cookies WHERE value IN ('in-db', 'in-wal')").Scan(&n))
	if n != 2 {
		t.Fatalf("the copied database holds %d of the 2 rows", n)
	}
}
