package main

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

	"github.com/zeebo/blake3"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
	"lifeboat/repo"
)

// profileEnv is an environment with a full key (testPW), a workspace-only
// key, and a workspace holding a files and a Chromium fixture profile
// whose Cookies database was left with an un-checkpointed WAL.
type profileEnv struct {
	*env
	fx      *fixture.Fixture
	src     string // the workspace
	chrome  string // the fixture user-data-dir inside it
	wsPW    string // password file of the workspace-only key
	fullPW  string
	outputs []string // every stdout and stderr seen
}

const chromeRel = "home/agent/.config/chromium"

func newProfileEnv(t *testing.T) *profileEnv {
	seed := seedtest.Seed(t)
	e := &profileEnv{env: newEnv(t), fx: localstorage.New(seed)}
	e.init()
	e.fullPW = e.passwdFile
	e.wsPW = filepath.Join(e.dir, "pw-ws")
	must(t, os.WriteFile(e.wsPW, []byte("workspace-only-password"), 0o600))
	e.ok("key", "add", "--tiers", "workspace", "--new-password-file", e.wsPW, "--kdf-memory-kib", "64", "--kdf-time", "1")
	e.src = filepath.Join(e.dir, "ws")
	writeTree(t, filepath.Join(e.src, "project"), seed)
	e.chrome = filepath.Join(e.src, filepath.FromSlash(chromeRel))
	must(t, os.MkdirAll(filepath.Dir(e.chrome), 0o700))
	must(t, e.fx.Write(context.Background(), e.chrome, fixture.Options{WAL: true}))
	return e
}

// lb runs lifeboat with the given password file and records its output.
func (e *profileEnv) lb(pw string, args ...string) result {
	e.t.Helper()
	e.passwdFile = pw
	r := e.run(args...)
	e.outputs = append(e.outputs, r.stdout, r.stderr)
	return r
}

func (e *profileEnv) lbOK(pw string, args ...string) result {
	e.t.Helper()
	r := e.lb(pw, args...)
	if r.code != 0 {
		e.t.Fatalf("lifeboat %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

func TestProfileCaptureRestore(t *testing.T) {
	e := newProfileEnv(t)
	ctx := context.Background()
	// A workspace-only key refuses to capture a workspace with a profile
	// rather than put the profile in the workspace tree.
	if r := e.lb(e.wsPW, "capture", "--workspace", "w", e.src); r.code != exitTierLocked || !strings.Contains(r.stderr, chromeRel) {
		t.Fatalf("capture with a workspace-only key: exit %d %s", r.code, r.stderr)
	}
	sum := last(jsonLines(t, e.lbOK(e.fullPW, "capture", "--workspace", "w", "--json", e.src).stdout))
	profs := sum["profiles"].([]any)
	if len(profs) != 1 || profs[0].(map[string]any)["path"] != chromeRel || profs[0].(map[string]any)["kind"] != "chromium" {
		t.Fatalf("capture summary profiles: %v", sum)
	}
	snap := sum["snapshot"].(string)

	// The workspace listing has no profile file.
	ls := e.lbOK(e.fullPW, "ls", snap).stdout
	if strings.Contains(ls, "chromium") || !strings.Contains(ls, "project") {
		t.Fatalf("ls of the workspace tree:\n%s", ls)
	}

	// Full key, --profiles: everything back, validated, crash state reset.
	t1 := filepath.Join(e.dir, "r1")
	msg := last(jsonLines(t, e.lbOK(e.fullPW, "restore", "--json", "--profiles", "--target", t1, snap).stdout))
	if msg["sensitive"] != "restored" || len(msg["profiles"].([]any)) != 1 {
		t.Fatalf("restore --profiles: %v", msg)
	}
	if err := e.fx.Check(ctx, filepath.Join(t1, filepath.FromSlash(chromeRel)), true); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, filepath.Join(e.src, "project"), filepath.Join(t1, "project"))

	// Full key without --profiles: workspace only, and it says so.
	t2 := filepath.Join(e.dir, "r2")
	msg = last(jsonLines(t, e.lbOK(e.fullPW, "restore", "--json", "--target", t2, snap).stdout))
	if msg["sensitive"] != "not_requested" {
		t.Fatalf("restore without --profiles: %v", msg)
	}
	assertNoProfile(t, t2)

	// Workspace-only key: lists and restores the workspace, reports the
	// sensitive part it cannot open, refuses --profiles with exit 16.
	if out := e.lbOK(e.wsPW, "snapshots").stdout; !strings.Contains(out, snap[:8]) {
		t.Fatalf("snapshots with a workspace-only key:\n%s", out)
	}
	t3 := filepath.Join(e.dir, "r3")
	r := e.lbOK(e.wsPW, "restore", "--target", t3, snap)
	if !strings.Contains(r.stdout, "sensitive part (browser profiles) that your key cannot open") {
		t.Fatalf("workspace-only restore did not report the sensitive part:\n%s", r.stdout)
	}
	assertSameTree(t, filepath.Join(e.src, "project"), filepath.Join(t3, "project"))
	assertNoProfile(t, t3)
	msg = last(jsonLines(t, e.lbOK(e.wsPW, "restore", "--json", "--target", filepath.Join(e.dir, "r3b"), snap).stdout))
	if msg["sensitive"] != "locked" {
		t.Fatalf("workspace-only restore message: %v", msg)
	}
	t4 := filepath.Join(e.dir, "r4")
	r = e.lb(e.wsPW, "restore", "--profiles", "--target", t4, snap)
	if r.code != exitTierLocked || !strings.Contains(r.stderr, "sensitive part") || !strings.Contains(r.stderr, "without --profiles") {
		t.Fatalf("restore --profiles with a workspace-only key: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Lstat(t4); !os.IsNotExist(err) {
		t.Fatalf("refused restore created the target: %v", err)
	}
	r = e.lb(e.wsPW, "restore", "--json", "--profiles", "--target", t4, snap)
	if ex := jsonLines(t, r.stderr); r.code != exitTierLocked || ex[0]["code"].(float64) != exitTierLocked {
		t.Fatalf("JSON refusal: %d %s", r.code, r.stderr)
	}

	// The proof: nothing a workspace-only key can read holds a secret.
	e.assertNoLeak(t)
}

func assertNoProfile(t *testing.T, target string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(target, filepath.FromSlash(chromeRel))); !os.IsNotExist(err) {
		t.Fatalf("profile restored into %s: %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(target, filepath.FromSlash(filepath.Dir(chromeRel)))); err != nil {
		t.Fatalf("the profile's parent directory (a workspace directory) was not restored: %v", err)
	}
}

func assertSameTree(t *testing.T, want, got string) {
	t.Helper()
	var a, b []string
	for _, x := range []struct {
		root string
		out  *[]string
	}{{want, &a}, {got, &b}} {
		err := filepath.WalkDir(x.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(x.root, p)
			line := rel
			if d.Type().IsRegular() {
				c, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				line += " " + string(blake3Hex(c))
			}
			*x.out = append(*x.out, line)
			return nil
		})
		must(t, err)
	}
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("%s differs from %s", got, want)
	}
}

func blake3Hex(b []byte) []byte {
	s := blake3.Sum256(b)
	return s[:]
}

// assertNoLeak opens the repository with the workspace-only key and
// checks every object it can decrypt (workspace packs blob by blob,
// workspace index objects, snapshots), every raw repository and cache
// file, and every output the commands printed: no byte string of
// Fixture.Secrets may appear. As a control, the same scan with the full
// key must find the encrypted cookie values in the sensitive blobs.
func (e *profileEnv) assertNoLeak(t *testing.T) {
	t.Helper()
	secrets := e.fx.Secrets()
	leak := func(where string, b []byte) {
		for _, s := range secrets {
			if bytes.Contains(b, s) {
				t.Errorf("a fixture secret appears in %s", where)
			}
		}
	}
	wsPlain, locked := readableObjects(t, e.repo, e.cache+"-ws-scan", "workspace-only-password")
	if locked == 0 {
		t.Fatal("no sensitive pack or index object was found locked: the profile is not in the sensitive tier")
	}
	for where, b := range wsPlain {
		leak(where, b)
	}
	err := filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(p, e.src) || strings.Contains(p, string(filepath.Separator)+"r1"+string(filepath.Separator)) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		leak(p, b)
		return nil
	})
	must(t, err)
	for i, o := range e.outputs {
		leak("command output "+strconv.Itoa(i), []byte(o))
	}
	// Control: the full key sees the secrets in sensitive blobs.
	fullPlain, _ := readableObjects(t, e.repo, e.cache+"-full-scan", testPW)
	var all []byte
	for _, b := range fullPlain {
		all = append(all, b...)
	}
	found := 0
	for _, s := range secrets {
		if bytes.Contains(all, s) {
			found++
		}
	}
	if found < len(e.fx.Cookies) {
		t.Fatalf("control failed: the full key's plaintexts hold only %d of %d secrets; the scan proves nothing", found, len(secrets))
	}
}

// readableObjects opens the repository with password and returns the
// plaintext of every object it can decrypt, by where it came from, and how
// many packs and index objects it could not open for want of the tier.
func readableObjects(t *testing.T, repoDir, cache, password string) (map[string][]byte, int) {
	t.Helper()
	ctx := context.Background()
	be, err := local.Open(repoDir)
	must(t, err)
	r, err := repo.Open(ctx, be, []byte(password), repo.Options{CacheDir: cache})
	must(t, err)
	defer r.Close(ctx)
	out := map[string][]byte{}
	locked := 0
	must(t, be.List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		data, err := be.Load(ctx, backend.Handle{Type: backend.Pack, Name: fi.Name}, 0, 0)
		if err != nil {
			return err
		}
		tr, err := pack.DecodeTrailer(data[len(data)-pack.TrailerSize:], int64(len(data)))
		if err != nil {
			return err
		}
		blobEnd := int64(len(data)) - pack.TrailerSize - int64(tr.HeaderLen)
		entries, err := pack.OpenHeader(r.TierKeys, tr, data[blobEnd:len(data)-pack.TrailerSize], blobEnd)
		if errors.Is(err, crypt.ErrTierLocked) {
			locked++
			return nil
		}
		if err != nil {
			return err
		}
		k, err := r.TierKeys(tr.Tier)
		if err != nil {
			return err
		}
		for _, en := range entries {
			plain, err := pack.OpenVerified(k, en, data[en.Offset:en.Offset+en.Length], nil)
			if err != nil {
				return err
			}
			out["pack "+fi.Name[:8]+" blob "+en.ID.Short()] = plain
		}
		return nil
	}))
	for _, kind := range []crypt.ObjectKind{crypt.KindIndex, crypt.KindSnapshot} {
		must(t, r.ListObjects(ctx, kind, func(id blob.ID) error {
			_, b, err := r.LoadObject(ctx, kind, id)
			if errors.Is(err, crypt.ErrTierLocked) {
				locked++
				return nil
			}
			out[string(kind.String())+" "+id.Short()] = b
			return err
		}))
	}
	return out, locked
}

func TestProfileRunningBrowser(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := filepath.Join(e.dir, "ws")
	chrome := filepath.Join(src, "chrome")
	must(t, os.MkdirAll(src, 0o700))
	must(t, localstorage.New(1).Write(context.Background(), chrome, fixture.Options{LockPID: os.Getpid()}))
	r := e.run("capture", "--workspace", "w", src)
	if r.code != exitBrowserRun || !strings.Contains(r.stderr, "browser running") || !strings.Contains(r.stderr, chrome) {
		t.Fatalf("capture of a running profile: exit %d %s", r.code, r.stderr)
	}
	r = e.run("capture", "--json", "--workspace", "w", "--profile", chrome, "--no-profile-discovery", src)
	if ex := jsonLines(t, r.stderr); r.code != exitBrowserRun || ex[0]["code"].(float64) != exitBrowserRun {
		t.Fatalf("JSON: exit %d %s", r.code, r.stderr)
	}
	if out := e.ok("snapshots", "--json").stdout; out != "" {
		t.Fatalf("a snapshot was saved: %s", out)
	}
	// Once the browser is gone (the lock names a dead process), it captures.
	must(t, os.Remove(filepath.Join(chrome, "SingletonLock")))
	must(t, os.Symlink("otherhost-1", filepath.Join(chrome, "SingletonLock")))
	e.ok("capture", "--workspace", "w", src)
}

func TestProfileCorruptCookiesFlagged(t *testing.T) {
	e := newEnv(t)
	e.init()
	ctx := context.Background()
	src := filepath.Join(e.dir, "ws")
	chrome := filepath.Join(src, "chrome")
	must(t, os.MkdirAll(src, 0o700))
	fx := localstorage.New(2)
	must(t, fx.Write(ctx, chrome, fixture.Options{}))
	cookies := filepath.Join(chrome, "Default", "Network", "Cookies")
	b, err := os.ReadFile(cookies)
	must(t, err)
	for i := 4096; i < len(b) && i < 4608; i++ {
		b[i] ^= 0x5A
	}
	must(t, os.WriteFile(cookies, b, 0o600))
	e.capture("w", src) // captured as it is
	target := filepath.Join(e.dir, "out")
	r := e.run("restore", "--json", "--profiles", "--workspace", "w", "--target", target, "latest")
	if r.code != exitProfileBad {
		t.Fatalf("restore of a profile with a corrupt Cookies database: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var flagged bool
	for _, m := range jsonLines(t, r.stdout) {
		if m["message_type"] == "profile_problem" && m["profile"] == "chrome" && m["path"] == "Default/Network/Cookies" &&
			strings.Contains(m["what"].(string), "integrity") {
			flagged = true
		}
	}
	if !flagged {
		t.Fatalf("no profile_problem for Cookies:\n%s", r.stdout)
	}
	got, err := os.ReadFile(filepath.Join(target, "chrome", "Default", "Network", "Cookies"))
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("the corrupt Cookies database was not restored as captured: %v", err)
	}
	// The rest of the profile is there.
	if _, err := os.Stat(filepath.Join(target, "chrome", "Default", "Login Data")); err != nil {
		t.Fatal(err)
	}
}

func TestProfileSymlinkNotFollowed(t *testing.T) {
	e := newEnv(t)
	e.init()
	ctx := context.Background()
	src := filepath.Join(e.dir, "ws")
	must(t, os.MkdirAll(src, 0o700))
	must(t, os.WriteFile(filepath.Join(src, "file.txt"), []byte("workspace"), 0o600))
	outside := filepath.Join(e.dir, "outside-chrome")
	fx := localstorage.New(3)
	must(t, fx.Write(ctx, outside, fixture.Options{}))
	must(t, os.Symlink(outside, filepath.Join(src, "linked")))
	sum := e.capture("w", src)
	if len(sum["profiles"].([]any)) != 0 {
		t.Fatalf("a profile behind a symlink was discovered: %v", sum)
	}
	r := e.run("capture", "--workspace", "w", "--profile", filepath.Join(src, "linked"), src)
	if r.code != exitUsage || !strings.Contains(r.stderr, "symlink") {
		t.Fatalf("--profile through a symlink: exit %d %s", r.code, r.stderr)
	}
	r = e.run("capture", "--workspace", "w", "--profile", outside, src)
	if r.code != exitUsage || !strings.Contains(r.stderr, "not below the workspace") {
		t.Fatalf("--profile outside the workspace: exit %d %s", r.code, r.stderr)
	}
	// Nothing of the outside profile was stored: the symlink is kept as a symlink.
	plain, _ := readableObjects(t, e.repo, e.cache+"-scan", testPW)
	for where, b := range plain {
		for _, s := range fx.Secrets() {
			if bytes.Contains(b, s) {
				t.Fatalf("a secret of the profile outside the workspace is in %s", where)
			}
		}
	}
	if ls := e.ok("ls", "--workspace", "w", "latest").stdout; !strings.Contains(ls, "linked -> ") {
		t.Fatalf("the symlink is not in the snapshot:\n%s", ls)
	}
}

// TestTamperedIndexSensitivePack: someone with the workspace key writes a
// workspace index object that places a workspace blob in a sensitive
// pack. Loading it fails authentication and is reported as damage; the
// sensitive pack's content stays sealed.
func TestTamperedIndexSensitivePack(t *testing.T) {
	e := newProfileEnv(t)
	ctx := context.Background()
	e.lbOK(e.fullPW, "capture", "--workspace", "w", e.src)

	be, err := local.Open(e.repo)
	must(t, err)
	r, err := repo.Open(ctx, be, []byte("workspace-only-password"), repo.Options{CacheDir: e.cache + "-tamper"})
	must(t, err)
	var sensPack backend.FileInfo
	must(t, be.List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		data, err := be.Load(ctx, backend.Handle{Type: backend.Pack, Name: fi.Name}, fi.Size-pack.TrailerSize, pack.TrailerSize)
		if err != nil {
			return err
		}
		if tr, err := pack.DecodeTrailer(data, fi.Size); err == nil && tr.Tier == blob.Sensitive {
			sensPack = fi
		}
		return nil
	}))
	if sensPack.Name == "" {
		t.Fatal("no sensitive pack")
	}
	pid, err := blob.ParseID(sensPack.Name)
	must(t, err)
	fake := blob.ID{0xfa, 0xce}
	obj := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{{ID: pid, Size: uint32(sensPack.Size),
		Entries: []pack.Entry{{Type: blob.Data, ID: fake, Offset: 0, Length: 200, PlainLen: 160}}}}}
	k, err := r.TierKeys(blob.Workspace)
	must(t, err)
	sealed, err := index.Seal(k, obj)
	must(t, err)
	name := blob.ID(blake3.Sum256(sealed))
	must(t, be.Save(ctx, backend.Handle{Type: backend.Index, Name: name.String()}, sealed))
	must(t, r.Close(ctx))

	r, err = repo.Open(ctx, be, []byte("workspace-only-password"), repo.Options{CacheDir: e.cache + "-tamper2"})
	must(t, err)
	defer r.Close(ctx)
	_, err = r.LoadBlob(ctx, blob.Workspace, blob.Data, fake, nil)
	if !errors.Is(err, repo.ErrCorrupt) || !errors.Is(err, crypt.ErrAuth) {
		t.Fatalf("loading a workspace blob placed in a sensitive pack: %v", err)
	}
	res := e.lb(e.wsPW, "check", "--read-data")
	if res.code != exitCorrupt {
		t.Fatalf("check --read-data with the tampered index: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	e.assertNoLeak(t)
}

// Prune and the sensitive tier: with a full key, prune marks the profile
// trees and chunks of kept snapshots and frees those of forgotten ones; a
// workspace-only key's prune is refused and leaves every sensitive pack
// alone. The kept snapshot restores with its profile.
func TestProfilePrune(t *testing.T) {
	e := newProfileEnv(t)
	ctx := context.Background()
	var snaps []string
	for i := range 3 {
		// A new cookie store each time: the old profile chunks become garbage.
		fx := localstorage.New(uint64(1000 + i))
		must(t, os.RemoveAll(e.chrome))
		must(t, fx.Write(ctx, e.chrome, fixture.Options{}))
		e.fx = fx
		sum := last(jsonLines(t, e.lbOK(e.fullPW, "capture", "--workspace", "w", "--json", e.src).stdout))
		snaps = append(snaps, sum["snapshot"].(string))
	}
	sensitivePacks := func() int {
		n := 0
		for _, p := range readPackTiers(t, e.repo) {
			if p == "sensitive" {
				n++
			}
		}
		return n
	}
	e.lbOK(e.fullPW, "forget", "--workspace", "w", "--keep-last", "1")
	before := sensitivePacks()
	// A workspace-only key's prune cannot see what profiles need: it is
	// refused (exit 16) and changes nothing.
	if r := e.lb(e.wsPW, "prune", "--instant-delete", "--max-unused", "0%"); r.code != exitTierLocked || !strings.Contains(r.stderr, "every tier") {
		t.Fatalf("prune with a workspace-only key: exit %d %s", r.code, r.stderr)
	}
	if got := sensitivePacks(); got != before {
		t.Fatalf("prune with a workspace-only key changed sensitive packs: %d -> %d", before, got)
	}
	e.lbOK(e.fullPW, "prune", "--instant-delete", "--max-unused", "0%")
	if got := sensitivePacks(); got >= before {
		t.Fatalf("prune with a full key freed no sensitive pack (%d before, %d after)", before, got)
	}
	e.lbOK(e.fullPW, "check", "--read-data")
	target := filepath.Join(e.dir, "after-prune")
	e.lbOK(e.fullPW, "restore", "--profiles", "--target", target, snaps[2])
	if err := e.fx.Check(ctx, filepath.Join(target, filepath.FromSlash(chromeRel)), false); err != nil {
		t.Fatal(err)
	}
}

// readPackTiers returns the tier of every pack in the repository, read
// from the pack trailers (which are public).
func readPackTiers(t *testing.T, repoDir string) []string {
	t.Helper()
	var tiers []string
	err := filepath.WalkDir(filepath.Join(repoDir, "data"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		tr, err := pack.DecodeTrailer(b[len(b)-pack.TrailerSize:], int64(len(b)))
		if err != nil {
			return err
		}
		tiers = append(tiers, tr.Tier.String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tiers
}
