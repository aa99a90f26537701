package recovery

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	backendlocal "lifeboat/backend/local"
	"lifeboat/internal/proctest"
	"lifeboat/internal/repotest"
	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/repo"
)

const killChildEnv = "LIFEBOAT_RECOVERY_KILL_CHILD"

// killChild configures a child process that approves a recovery and stops
// at Point, printing "at <point>", until it is killed.
type killChild struct {
	Repo, Cache, State, Root, Point, Key, Checkpoint string
}

// runKillChildIfSet runs the child and exits when this test binary was
// started as one by TestKill9AtEveryStep.
func runKillChildIfSet() {
	cfg, ok := os.LookupEnv(killChildEnv)
	if !ok {
		return
	}
	if err := runKillChild(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "kill child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runKillChild(js string) error {
	var c killChild
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		return err
	}
	ctx := context.Background()
	be, err := backendlocal.Open(c.Repo)
	if err != nil {
		return err
	}
	r, err := repo.Open(ctx, be, repotest.Password, repo.Options{CacheDir: c.Cache})
	if err != nil {
		return err
	}
	store, err := OpenStore(c.State)
	if err != nil {
		return err
	}
	lc, err := New(Config{Store: store, Capturer: &RepoCapturer{Repo: r}, Providers: []providers.Provider{local.New(c.Root)}})
	if err != nil {
		return err
	}
	svc, err := NewService(ServiceConfig{Lifecycle: lc, Restorer: &RepoRestorer{Repo: r}, StateDir: c.State})
	if err != nil {
		return err
	}
	svc.hooks.step = func(_ Operation, at string) error {
		if at == c.Point {
			fmt.Println("at", at)
			select {} // until SIGKILL
		}
		return nil
	}
	op, err := svc.Approve(ctx, "bot1", c.Checkpoint, c.Key)
	if err != nil {
		return err
	}
	op, err = svc.Wait(ctx, op.ID)
	if err != nil {
		return err
	}
	fmt.Println("done", op.State)
	return nil
}

// TestKill9AtEveryStep: a real process running the recovery is killed
// with SIGKILL at every step of the state machine; the state store,
// reopened by another process, resumes the operation to the end, with one
// replacement, the files restored, the last good checkpoint kept and the
// directory-merge locks free (the kernel released them).
func TestKill9AtEveryStep(t *testing.T) {
	for _, point := range stepPoints {
		t.Run(point, func(t *testing.T) {
			e, cp := newLostREnv(t)
			e.close()
			cfg, _ := json.Marshal(killChild{Repo: e.repoDir, Cache: t.TempDir(), State: e.stateDir, Root: e.p.Root(),
				Point: point, Key: "kill-key", Checkpoint: cp.Snapshot})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), killChildEnv+"="+string(cfg), "GORACE=atexit_sleep_ms=0")
			sc := bufio.NewScanner(proctest.StartChild(t, cmd))
			if !sc.Scan() || sc.Text() != "at "+point {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("child did not stop at %s: %q %v", point, sc.Text(), sc.Err())
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			e.open()
			ops, err := e.svc.Operations("bot1")
			if err != nil || len(ops) != 1 || ops[0].State.Terminal() {
				t.Fatalf("operations left by the killed process: %+v %v", ops, err)
			}
			e.svc.Resume(e.ctx)
			done := e.wait(ops[0].ID)
			if done.State != OpRecovered {
				t.Fatalf("after resume: %+v", done)
			}
			if got := e.instances(); !slices.Equal(got, []string{string(done.Replacement)}) {
				t.Fatalf("instances: %v", got)
			}
			for name, body := range botFiles {
				if got := readFile(t, filepath.Join(e.dir(done.Replacement), name)); got != body {
					t.Fatalf("%s: %q", name, got)
				}
			}
			w, _ := e.store.Workspace("bot1")
			if w.ID != "bot1" || w.Generation != 1 || w.LastGood.Snapshot != cp.Snapshot || !strings.HasPrefix(string(w.Instance), "ws-") {
				t.Fatalf("workspace: %+v", w)
			}
		})
	}
}
