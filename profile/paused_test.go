package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"lifeboat/profile/fixture"
	"lifeboat/profile/profiletest"
)

func TestMain(m *testing.M) { profiletest.Main(m) }

// startWriter starts a browser stand-in (profiletest) and kills it at the
// end of the test.
func startWriter(t *testing.T, o profiletest.Options) *profiletest.Writer {
	t.Helper()
	w, err := profiletest.StartWriter(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Kill)
	return w
}

// lockChromium points dir's SingletonLock at process pid of this host.
func lockChromium(t *testing.T, dir string, pid int) {
	t.Helper()
	host, _ := os.Hostname()
	lock := filepath.Join(dir, "SingletonLock")
	must(t, os.Remove(lock))
	must(t, os.Symlink(host+"-"+strconv.Itoa(pid), lock))
}

// readAll maps each regular file under dir to its content.
func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	}))
	return out
}

// TestPausedChromiumCaptured: a Chromium profile whose browser (the
// process SingletonLock names, and its child) is stopped in the middle of
// write transactions is captured without a checkpoint, each database with
// its -wal and -journal and without -shm; the restore replays them, so
// each database holds exactly its committed rows (those only in the -wal
// too, none of the open transaction), passes integrity_check and has no
// side files left.
func TestPausedChromiumCaptured(t *testing.T) {
	ctx := context.Background()
	f := testFixture(t)
	src := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, f, src, fixture.Options{WAL: true})
	history := filepath.Join(src, fixture.Profile, "History")
	topSites := filepath.Join(src, fixture.Profile, "Top Sites")
	w := startWriter(t, profiletest.Options{WAL: history, Journal: topSites, Child: true, StopChild: true})
	if !w.Report.WALGrew || !w.Report.JournalHot {
		t.Fatalf("the writer's open transactions did not reach the files (%+v); the test would prove nothing", w.Report)
	}
	lockChromium(t, src, w.PID)
	p := Profile{Dir: src, Rel: "chrome", Kind: Chromium}
	if st, err := Detect(p); st != Paused || err != nil {
		t.Fatalf("Detect of a stopped browser with a stopped child: %v %v", st, err)
	}
	before := readAll(t, src)
	probs, err := Prepare(ctx, &p)
	if err != nil || len(probs) != 0 || p.State != Paused {
		t.Fatalf("Prepare of a paused browser: state %v, %v %v", p.State, probs, err)
	}
	if after := readAll(t, src); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("Prepare changed the profile of a paused browser (a checkpoint ran)")
	}

	staging := t.TempDir()
	restored := filepath.Join(staging, "chrome")
	copyKept(t, p, restored)
	rh, rt := filepath.Join(restored, fixture.Profile, "History"), filepath.Join(restored, fixture.Profile, "Top Sites")
	for _, want := range []string{rh + "-wal", rt + "-journal", filepath.Join(restored, fixture.Profile, "Network", "Cookies-wal")} {
		if _, err := os.Lstat(want); err != nil {
			t.Errorf("the capture of a paused profile left out %s: %v", want, err)
		}
	}
	for _, never := range []string{rh + "-shm", filepath.Join(restored, "SingletonLock")} {
		if _, err := os.Lstat(never); err == nil {
			t.Errorf("the capture of a paused profile holds %s", never)
		}
	}
	// The test has teeth: the database files alone are wrong.
	alone := t.TempDir()
	copyFile(t, rh, filepath.Join(alone, "History"))
	copyFile(t, rt, filepath.Join(alone, "Top Sites"))
	if err := profiletest.CheckRestored(ctx, filepath.Join(alone, "History"), ""); err == nil {
		t.Fatal("History without its -wal already holds every committed row")
	}
	if err := profiletest.CheckRestored(ctx, "", filepath.Join(alone, "Top Sites")); err == nil {
		t.Fatal("Top Sites without its hot -journal holds only the committed rows")
	}

	probs, err = Validate(ctx, staging, []Profile{{Rel: "chrome", Kind: Chromium}})
	if err != nil || len(probs) != 0 {
		t.Fatalf("Validate: %v %v", probs, err)
	}
	if err := profiletest.CheckRestored(ctx, rh, rt); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, restored, true); err != nil { // the fixture's WAL cookie too
		t.Fatal(err)
	}
}

// TestPausedParentRunningChild: a stopped browser process with a child
// that still runs (Chromium's network service writes Cookies) is running.
func TestPausedParentRunningChild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, testFixture(t), dir, fixture.Options{})
	w := startWriter(t, profiletest.Options{Child: true})
	lockChromium(t, dir, w.PID)
	p := Profile{Dir: dir, Rel: "chrome", Kind: Chromium}
	st, err := Detect(p)
	var re *RunningError
	if st != Running || !errors.As(err, &re) || re.PID != w.PID {
		t.Fatalf("a stopped browser with a running child: %v %v", st, err)
	}
	msg := err.Error()
	for _, want := range []string{"browser running", dir, "descendant process " + strconv.Itoa(w.Report.ChildPID), "quit the browser, or pause process " + strconv.Itoa(w.PID) + " and all its descendants"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q lacks %q", msg, want)
		}
	}
	if _, err := Prepare(context.Background(), &p); !errors.Is(err, ErrBrowserRunning) {
		t.Fatalf("Prepare: %v", err)
	}
}

// TestPausedFirefox: a Firefox whose .parentlock is held by a stopped
// process (named by the lock itself, F_OFD_GETLK) is paused, and its
// cookies.sqlite comes back with the rows only its -wal held.
func TestPausedFirefox(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "firefox")
	prof := filepath.Join(root, "abc.default-release")
	must(t, os.MkdirAll(prof, 0o700))
	must(t, os.WriteFile(filepath.Join(root, "profiles.ini"), []byte("[Profile0]\nPath=abc.default-release\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(prof, "prefs.js"), []byte("// prefs\n"), 0o600))
	w := startWriter(t, profiletest.Options{WAL: filepath.Join(prof, "cookies.sqlite"), ParentLock: filepath.Join(prof, ".parentlock")})
	p := Profile{Dir: root, Rel: "ff", Kind: Firefox}
	if _, err := Prepare(ctx, &p); err != nil || p.State != Paused {
		t.Fatalf("Prepare with .parentlock held by a stopped process: %v %v", p.State, err)
	}
	// The lock symlink naming the same stopped process agrees.
	must(t, os.Symlink("127.0.0.1:+"+strconv.Itoa(w.PID), filepath.Join(prof, "lock")))
	if st, err := Detect(p); st != Paused || err != nil {
		t.Fatalf("lock and .parentlock of a stopped process: %v %v", st, err)
	}
	staging := t.TempDir()
	copyKept(t, p, filepath.Join(staging, "ff"))
	probs, err := Validate(ctx, staging, []Profile{{Rel: "ff", Kind: Firefox}})
	if err != nil || len(probs) != 0 {
		t.Fatalf("Validate: %v %v", probs, err)
	}
	rp := filepath.Join(staging, "ff", "abc.default-release")
	if err := profiletest.CheckRestored(ctx, filepath.Join(rp, "cookies.sqlite"), ""); err != nil {
		t.Fatal(err)
	}
	for _, lock := range []string{"lock", ".parentlock"} {
		if _, err := os.Lstat(filepath.Join(rp, lock)); err == nil {
			t.Errorf("%s was restored", lock)
		}
	}
}

// TestValidateSideSymlink: a side file restored as a symlink (the
// captured workspace is the bot's) is never opened through: SQLite would
// write, truncate or map the file it points to.
func TestValidateSideSymlink(t *testing.T) {
	ctx := context.Background()
	f := testFixture(t)
	staging, restored := restoredChromium(t, f)
	victims := t.TempDir()
	cookies := filepath.Join(restored, fixture.Profile, "Network", "Cookies")
	for _, s := range []string{"-wal", "-shm"} {
		must(t, os.WriteFile(filepath.Join(victims, s), []byte("not yours"), 0o600))
		must(t, os.Symlink(filepath.Join(victims, s), cookies+s))
	}
	probs, err := Validate(ctx, staging, []Profile{{Rel: "chrome", Kind: Chromium}})
	if err != nil || len(probs) != 1 || !strings.Contains(probs[0].What, "not a regular file") {
		t.Fatalf("Validate: %v %v", probs, err)
	}
	for _, s := range []string{"-wal", "-shm"} {
		if b, err := os.ReadFile(filepath.Join(victims, s)); err != nil || !bytes.Equal(b, []byte("not yours")) {
			t.Errorf("the file a restored %s symlink pointed to was changed: %q %v", s, b, err)
		}
		if _, err := os.Lstat(cookies + s); err == nil {
			t.Errorf("the %s symlink is still there", s)
		}
	}
	if err := f.Check(ctx, restored, false); err != nil {
		t.Fatal(err)
	}
}

func TestDecideState(t *testing.T) {
	cases := []struct {
		rel             string
		stopped, paused Action
	}{
		{"Default/History-wal", Skip, Keep},
		{"Default/Top Sites-journal", Skip, Keep},
		{"Default/History-shm", Skip, Skip},
		{"Default/History", Keep, Keep},
		{"Default/Cache/index-wal", Skip, Skip}, // inside a skipped folder
		{"-wal", Keep, Keep},                    // a name that is only the suffix
		{"SingletonLock", Never, Never},
	}
	for _, c := range cases {
		if got, _ := DecideState(Chromium, NotRunning, c.rel); got != c.stopped {
			t.Errorf("%q, browser not running: %v, want %v", c.rel, got, c.stopped)
		}
		if got, _ := DecideState(Chromium, Paused, c.rel); got != c.paused {
			t.Errorf("%q, browser paused: %v, want %v", c.rel, got, c.paused)
		}
		p := Profile{Kind: Chromium, State: Paused}
		if keep := p.CaptureFilter()(c.rel); keep != (c.paused == Keep) {
			t.Errorf("%q: paused capture filter %v", c.rel, keep)
		}
	}
}

// TestSideRulesDocumented: docs/profiles.md lists the side-file rules
// for each browser state.
func TestSideRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/profiles.md")
	must(t, err)
	for _, r := range []struct {
		when string
		rule Rule
	}{{"both", shmRule}, {"both, browser not running", sideRuleStopped}, {"both, browser paused", sideRulePaused}} {
		pat := "`" + strings.ReplaceAll(r.rule.Pattern, ", ", "`, `") + "`"
		line := "| " + r.when + " | " + pat + " | " + r.rule.Action.String() + " | " + r.rule.Why + " |"
		if !bytes.Contains(doc, []byte(line)) {
			t.Errorf("docs/profiles.md lacks the row %q", line)
		}
	}
}

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line  string
		state byte
		ppid  int
		ok    bool
	}{
		{"42 (chrome) T 7 42 42 0", 'T', 7, true},
		{"42 (a) b) (c) t 9 1", 't', 9, true}, // a name with spaces and ')'
		{"42 (chrome", 0, 0, false},
		{"42 (x) S", 0, 0, false},
	} {
		st, ppid, ok := parseStat([]byte(c.line))
		if ok != c.ok || (ok && (st != c.state || ppid != c.ppid)) {
			t.Errorf("%q: %c %d %v", c.line, st, ppid, ok)
		}
	}
}

// TestPrepareSideSymlink: before a checkpoint too (browser not running),
// a side file that is a symlink keeps SQLite from opening the database:
// the file it points to is not changed, and the problem is reported.
func TestPrepareSideSymlink(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, testFixture(t), src, fixture.Options{WAL: true})
	victim := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(victim, []byte("not yours"), 0o600))
	cookies := filepath.Join(src, fixture.Profile, "Network", "Cookies")
	_ = os.Remove(cookies + "-shm")
	must(t, os.Symlink(victim, cookies+"-shm"))
	p := Profile{Dir: src, Rel: "chrome", Kind: Chromium}
	probs, err := Prepare(ctx, &p)
	if err != nil || len(probs) != 1 || !strings.Contains(probs[0].What, "Cookies-shm is not a regular file") {
		t.Fatalf("Prepare: %v %v", probs, err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not yours" {
		t.Fatalf("the file the -shm symlink points to: %q %v", b, err)
	}
}
