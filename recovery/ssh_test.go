package recovery

import (
	"context"
	"os/user"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/crypto/ssh"

	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
	"lifeboat/providers"
	lbssh "lifeboat/providers/ssh"
	"lifeboat/providers/ssh/sshdtest"
)

// TestRecoverLostSandboxSSH is the acceptance test against a real sshd:
// files and the browser-session fixture on an SSH host are checkpointed,
// the test sandbox is destroyed, the loss detected, the approval restores
// into a replacement on the host, and the files, the profile state and the
// unchanged workspace id are confirmed.
func TestRecoverLostSandboxSSH(t *testing.T) {
	ctx := context.Background()
	client, _ := sshdtest.NewKey(t)
	srv := sshdtest.Start(t, "", client)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir() // the host's instance root (the host is this machine)
	p, err := lbssh.New(lbssh.Config{Addr: srv.Addr, User: u.Username, Signers: []ssh.Signer{client},
		KnownHosts: sshdtest.KnownHosts(t, srv.Addr, srv.HostKey.PublicKey()), Root: root, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(root, "bot1"), botFiles)
	fx := localstorage.New(22)
	if err := fx.Write(ctx, filepath.Join(root, "bot1", "chrome"), fixture.Options{}); err != nil {
		t.Fatal(err)
	}
	store, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.AddWorkspace(Workspace{ID: "bot1", Provider: lbssh.Name, Instance: "bot1"}); err != nil {
		t.Fatal(err)
	}
	r := newTestRepo(t)
	lc, err := New(Config{Store: store, Capturer: &RepoCapturer{Repo: r}, Providers: []providers.Provider{p}, Clock: newFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	svc, err := NewService(ServiceConfig{Lifecycle: lc, Restorer: &RepoRestorer{Repo: r}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	cp := lc.Capture(ctx, "bot1", ReasonManual)
	if cp.Outcome != Captured {
		t.Fatalf("capture over ssh: %+v", cp)
	}
	if err := p.Destroy(ctx, "bot1"); err != nil {
		t.Fatal(err)
	}
	if h, err := svc.Check(ctx, "bot1"); err != nil || h.State != HealthLost {
		t.Fatalf("check: %+v %v", h, err)
	}
	offer, err := svc.Offer(ctx, "bot1")
	if err != nil || offer.Checkpoint != cp.Snapshot || !offer.BrowserProfile {
		t.Fatalf("offer: %+v %v", offer, err)
	}
	op, err := svc.Approve(ctx, "bot1", offer.Checkpoint, "ssh-approval")
	if err != nil {
		t.Fatal(err)
	}
	if op, err = svc.Wait(ctx, op.ID); err != nil || op.State != OpRecovered {
		t.Fatalf("operation: %+v %v", op, err)
	}
	w, _ := store.Workspace("bot1")
	if w.ID != "bot1" || w.Instance != op.Replacement || w.Generation != 1 {
		t.Fatalf("workspace: %+v", w)
	}
	for name, body := range botFiles {
		if got := readFile(t, filepath.Join(root, string(op.Replacement), name)); got != body {
			t.Fatalf("%s: %q", name, got)
		}
	}
	if err := fx.Check(ctx, filepath.Join(root, string(op.Replacement), "chrome"), false); err != nil {
		t.Fatalf("browser profile state: %v", err)
	}
	ents, _ := filepath.Glob(filepath.Join(root, "[^.]*")) // .lifeboat is the adapter's own area
	if !slices.Equal(ents, []string{filepath.Join(root, string(op.Replacement))}) {
		t.Fatalf("instances on the host: %v", ents)
	}
}
