package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

func harness(t *testing.T) (providertest.Harness, string) {
	root := t.TempDir()
	return providertest.Harness{
		New: func(t *testing.T) providers.Provider { return New(root) },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) {
			if err := os.RemoveAll(filepath.Join(root, string(id))); err != nil {
				t.Fatal(err)
			}
		},
		Unreachable: func(t *testing.T) providers.Provider { return New(filepath.Join(root, "no-such-root")) },
		Absent:      "never-created",
	}, root
}

func TestConformance(t *testing.T) {
	h, _ := harness(t)
	providertest.Run(t, h)
}

// TestConformanceWithoutExchange runs the suite with RENAME_EXCHANGE
// reported as unsupported, so every switch takes the two-step fallback.
func TestConformanceWithoutExchange(t *testing.T) {
	noExchange(t)
	h, _ := harness(t)
	providertest.Run(t, h)
}

func noExchange(t *testing.T) {
	old := exchange
	exchange = func(*os.Root, string, string) error { return errExchangeUnsupported }
	t.Cleanup(func() { exchange = old })
}

func TestRootUnavailable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(dir, "absent"), file} {
		p := New(root)
		_, err := p.Inspect(ctx, "ws")
		providertest.WantKind(t, "Inspect under "+root, err, providers.KindUnavailable)
		if !strings.Contains(err.Error(), root) {
			t.Fatalf("error does not name the root: %v", err)
		}
		_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
		providertest.WantKind(t, "Create under "+root, err, providers.KindUnavailable)
		providertest.WantKind(t, "DeleteCheckpoint under "+root, p.DeleteCheckpoint(ctx, "ws~0123456789abcdef"), providers.KindUnavailable)
	}
	// A root without search permission (only meaningful when not root:
	// root bypasses permission bits).
	if os.Geteuid() != 0 {
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(locked, 0o700) })
		_, err := New(locked).Inspect(ctx, "ws")
		providertest.WantKind(t, "Inspect under an unreadable root", err, providers.KindUnavailable)
	}
}

func TestHostileIDs(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	// Something beside the root that ".." tricks would reach.
	if err := os.Mkdir(filepath.Join(parent, "sibling"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := New(root)
	ids := []providers.InstanceID{"", ".", "..", "../sibling", "a/b", "/etc", ".lifeboat", ".hidden",
		"x\x00y", "sp ace", "semi;colon", providers.InstanceID(strings.Repeat("a", 129)), providers.InstanceID(outside)}
	for _, id := range ids {
		_, err := p.Inspect(ctx, id)
		providertest.WantKind(t, "Inspect("+string(id)+")", err, providers.KindInvalid)
		providertest.WantKind(t, "Destroy("+string(id)+")", p.Destroy(ctx, id), providers.KindInvalid)
		_, err = p.ReadFiles(ctx, id)
		providertest.WantKind(t, "ReadFiles", err, providers.KindInvalid)
		_, err = p.WriteFiles(ctx, id, outside)
		providertest.WantKind(t, "WriteFiles", err, providers.KindInvalid)
		providertest.WantKind(t, "Switch", p.Switch(ctx, id, outside), providers.KindInvalid)
		_, err = p.Exec(ctx, id, []string{"true"}, nil)
		providertest.WantKind(t, "Exec", err, providers.KindInvalid)
		_, err = p.Checkpoint(ctx, id)
		providertest.WantKind(t, "Checkpoint", err, providers.KindInvalid)
		_, err = p.Rollback(ctx, id, "ws~0123456789abcdef")
		providertest.WantKind(t, "Rollback", err, providers.KindInvalid)
		_, err = p.Create(ctx, providers.CreateSpec{Template: string(id)})
		if id != "" {
			providertest.WantKind(t, "Create from template "+string(id), err, providers.KindInvalid)
		}
	}
	for _, cp := range []providers.CheckpointID{"", "../x", "ws~../../x", "ws~0123", "../ws~0123456789abcdef", "ws~0123456789ABCDEF", "ws"} {
		providertest.WantKind(t, "DeleteCheckpoint("+string(cp)+")", p.DeleteCheckpoint(ctx, cp), providers.KindInvalid)
		_, err := p.Rollback(ctx, "ws", cp)
		providertest.WantKind(t, "Rollback to "+string(cp), err, providers.KindInvalid)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "keep" {
		t.Fatalf("outside data changed: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(parent, "sibling")); err != nil {
		t.Fatalf("sibling of the root touched: %v", err)
	}
}

// TestSymlinkEscapes: an instance name that is a symlink out of the root is
// never treated as a workspace, and symlinks inside copied trees never
// carry a write outside.
func TestSymlinkEscapes(t *testing.T) {
	ctx := context.Background()
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	p := New(root)
	_, err := p.Inspect(ctx, "evil")
	providertest.WantKind(t, "Inspect of a symlinked instance", err, providers.KindConflict)
	_, err = p.ReadFiles(ctx, "evil")
	providertest.WantKind(t, "ReadFiles of a symlinked instance", err, providers.KindConflict)
	providertest.WantKind(t, "Destroy of a symlinked instance", p.Destroy(ctx, "evil"), providers.KindConflict)
	_, err = p.Checkpoint(ctx, "evil")
	providertest.WantKind(t, "Checkpoint of a symlinked instance", err, providers.KindConflict)

	// A source tree whose symlinks point out: copied as links, and the
	// instance built from them does not write through them.
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(src, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "secret-link")); err != nil {
		t.Fatal(err)
	}
	staging, err := p.WriteFiles(ctx, id, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Switch(ctx, id, staging); err != nil {
		t.Fatal(err)
	}
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Rollback(ctx, id, cp); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(root, string(id), "out")); err != nil || target != outside {
		t.Fatalf("symlink not kept as a link: %q, %v", target, err)
	}
	entries, _ := os.ReadDir(outside)
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "keep" || len(entries) != 1 {
		t.Fatalf("outside touched: %q, %v, %d entries", b, err, len(entries))
	}
	// A staging path that points through the instance's link is refused.
	providertest.WantKind(t, "Switch through a link", p.Switch(ctx, id, filepath.Join(root, string(id), "out")), providers.KindInvalid)
}

func TestSpecialFilesRefused(t *testing.T) {
	ctx := context.Background()
	p := New(t.TempDir())
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := mkfifo(filepath.Join(src, "pipe")); err != nil {
		t.Fatal(err)
	}
	_, err = p.WriteFiles(ctx, id, src)
	if !strings.Contains(err.Error(), "pipe") {
		t.Fatalf("error does not name the fifo: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(p.Root(), stagingDir))
	if len(entries) != 0 {
		t.Fatalf("failed WriteFiles left %d staging dirs", len(entries))
	}
	_, err = p.WriteFiles(ctx, id, filepath.Join(src, "absent"))
	providertest.WantKind(t, "WriteFiles from a missing source", err, providers.KindInvalid)
}

func TestCreateTemplateAndIdempotencyAcrossRestart(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	tmpl := filepath.Join(root, "template")
	providertest.Tree(t, tmpl, "tmpl")
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "replacement-1", Template: "template"})
	if err != nil {
		t.Fatal(err)
	}
	if id != IDForKey("replacement-1") {
		t.Fatalf("id %s not derived from the key", id)
	}
	if got, want := providertest.Listing(t, filepath.Join(root, string(id))), providertest.Listing(t, tmpl); got != want {
		t.Fatalf("template copy:\n%s\nwant:\n%s", got, want)
	}
	// The workspace changes; a retried Create (new process) returns it as is.
	if err := os.WriteFile(filepath.Join(root, string(id), "new"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := New(root).Create(ctx, providers.CreateSpec{IdempotencyKey: "replacement-1", Template: "template"})
	if err != nil || again != id {
		t.Fatalf("retry = %s, %v", again, err)
	}
	if _, err := os.Stat(filepath.Join(root, string(id), "new")); err != nil {
		t.Fatalf("retried Create replaced the workspace: %v", err)
	}
	_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "r2", Template: "no-such"})
	providertest.WantKind(t, "Create from a missing template", err, providers.KindInvalid)
	a, _ := p.Create(ctx, providers.CreateSpec{})
	b, _ := p.Create(ctx, providers.CreateSpec{})
	if a == b || a == "" {
		t.Fatalf("keyless creates gave %q and %q", a, b)
	}
}

// TestCheckpointIsACopy: a checkpoint does not share inodes with the live
// tree, so an in-place write to a workspace file leaves it unchanged.
func TestCheckpointIsACopy(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, string(id), "db")
	if err := os.WriteFile(f, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	h, err := os.OpenFile(f, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte("AFTER!"), 0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Rollback of a destroyed instance brings it back.
	got, err := p.Rollback(ctx, id, cp)
	if err != nil || got != id {
		t.Fatalf("Rollback = %s, %v", got, err)
	}
	if b, _ := os.ReadFile(f); string(b) != "before" {
		t.Fatalf("rolled back content %q", b)
	}
	// No temporary checkpoint or staging is left behind.
	for _, d := range []string{stagingDir, checkpointsDir} {
		entries, _ := os.ReadDir(filepath.Join(root, d))
		for _, e := range entries {
			if e.Name() != string(cp) {
				t.Fatalf("left behind in %s: %s", d, e.Name())
			}
		}
	}
}

// TestSwitchFallbackInterrupted: when the two-step fallback stopped after
// parking the old tree, Inspect does not call the instance missing.
func TestSwitchFallbackInterrupted(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, switchingDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, string(id)), filepath.Join(root, switchingDir, string(id))); err != nil {
		t.Fatal(err)
	}
	_, err = p.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect mid-switch", err, providers.KindConflict)
	if !strings.Contains(err.Error(), switchingDir) {
		t.Fatalf("error does not say where the old tree is: %v", err)
	}
}

// TestSwitchFailureLeavesWorkspace: a switch whose rename fails leaves the
// old tree in place, with and without RENAME_EXCHANGE.
func TestSwitchFailureLeavesWorkspace(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		ctx := context.Background()
		root := t.TempDir()
		p := New(root)
		id, _ := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
		if err := os.WriteFile(filepath.Join(root, string(id), "keep"), []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		staging, err := p.WriteFiles(ctx, id, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// Make the staging name unrenameable: replace it by a file.
		if err := os.RemoveAll(staging); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(staging, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if fallback {
			noExchange(t)
		}
		if err := p.Switch(ctx, id, staging); err == nil {
			t.Fatal("switch of a non-directory staging succeeded")
		}
		if b, err := os.ReadFile(filepath.Join(root, string(id), "keep")); err != nil || string(b) != "old" {
			t.Fatalf("fallback=%v: workspace changed by a failed switch: %q, %v", fallback, b, err)
		}
	}
}

func TestExecCancelAndErrors(t *testing.T) {
	p := New(t.TempDir())
	id, _ := p.Create(context.Background(), providers.CreateSpec{IdempotencyKey: "k"})
	// The command signals through a fifo in the workspace that it is
	// running; only then is the context cancelled.
	if err := mkfifo(filepath.Join(p.Root(), string(id), "ready")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		f, err := os.Open(filepath.Join(p.Root(), string(id), "ready"))
		if err == nil {
			_, _ = f.Read(make([]byte, 1))
			f.Close()
		}
		cancel()
	}()
	_, err := p.Exec(ctx, id, []string{"sh", "-c", "echo > ready; exec sleep 600"}, nil)
	providertest.WantKind(t, "Exec cancelled", err, providers.KindUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Exec does not wrap context.Canceled: %v", err)
	}
	_, err = p.Exec(context.Background(), id, []string{"/no/such/binary"}, nil)
	providertest.WantKind(t, "Exec of a missing binary", err, providers.KindInvalid)
	res, err := p.Exec(context.Background(), id, []string{"sh", "-c", "head -c 2000000 /dev/zero"}, nil)
	if err != nil || len(res.Stdout) != MaxOutput {
		t.Fatalf("bounded output: %d bytes, %v", len(res.Stdout), err)
	}
}
