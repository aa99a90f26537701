package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"lifeboat/providers/docker/dockertest"
	"lifeboat/providers/tartree"
)

// TestRecoverDockerWorkspaceThroughServe is the acceptance test of the
// Docker provider: a real `lifeboat serve`, configured with a docker
// provider instance on a private dockerd, registers a workspace in a
// container someone else started, captures it with the container paused
// and a native checkpoint (commit) taken, keeps only the newest native
// checkpoint, rolls the workspace back onto the stored image (`lifeboat
// restart`), reports the stopped daemon as unreachable without creating
// anything, sees the removed container as lost, offers, and on approval
// recovers into a new container with the files, modes, hard links, a fifo
// and the browser session.
func TestRecoverDockerWorkspaceThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary and dockerd")
	}
	d := dockertest.Start(t)
	cli := d.Client(t)
	ctx := context.Background()

	// The sandbox: a container the operator started, with a workspace.
	orig := startContainer(t, cli, "bot1-box")
	src := filepath.Join(t.TempDir(), "workspace")
	fx := writeRecoverableTree(t, src, 11, 29)
	pushTree(t, cli, orig, src)

	s := newSvcEnv(t, "\n"+dockSection(d)+`
[workspaces.bot1]
park_interval = "1ns"
`)
	cfg, err := os.ReadFile(s.cfgPath)
	must(t, err)
	must(t, os.WriteFile(s.cfgPath, []byte(strings.Replace(string(cfg), "[lifecycle]\n", "[lifecycle]\nnative_interval = \"1ns\"\n", 1)), 0o600))
	s.checkConfig()
	s.start()
	s.cliOK("workspace", "add", "bot1", "--provider", "dock", "--instance", orig)

	// Captures pause the container and commit it; only the newest native
	// checkpoint is kept.
	rc := s.cliJSON("capture", "--workspace", "bot1")
	if rc["outcome"] != "captured" || rc["paused"] != true || rc["native"] == nil {
		t.Fatalf("capture: %v", rc)
	}
	first := rc["native"].(string)
	execIn(t, cli, orig, "echo written before the park > d2/late.txt")
	park := s.cliJSON("park", "bot1")
	if park["outcome"] != "captured" || park["paused"] != true || park["native"] == nil || park["native"] == first {
		t.Fatalf("park: %v", park)
	}
	second := park["native"].(string)
	if _, err := cli.ImageInspect(ctx, first); err == nil {
		t.Fatalf("the older native checkpoint %s is still there", first)
	}
	if _, err := cli.ImageInspect(ctx, second); err != nil {
		t.Fatalf("the newest native checkpoint %s: %v", second, err)
	}

	// Rollback restart onto the stored image: a new container; what was
	// written after the checkpoint is gone; the operator's container is
	// stopped, not removed.
	execIn(t, cli, orig, "echo after the checkpoint > after.txt")
	rr := s.cliJSON("restart", "bot1")
	inst, _ := rr["to"].(string)
	if rr["checkpoint"] != second || rr["from"] != orig || inst == "" || inst == orig {
		t.Fatalf("restart: %v", rr)
	}
	if out := execIn(t, cli, inst, "cat d2/late.txt; ls after.txt 2>&1 || true"); !strings.Contains(out, "written before the park") || !strings.Contains(out, "No such file") {
		t.Fatalf("the rolled-back container: %q", out)
	}
	if c, err := cli.ContainerInspect(ctx, orig, client.ContainerInspectOptions{}); err != nil || c.Container.State.Running {
		t.Fatalf("the operator's container after the rollback: %v %+v", err, c.Container.State)
	}
	if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" || rc["native"] == nil {
		t.Fatalf("capture of the rolled-back container: %v", rc)
	}

	// Outage: the daemon is stopped. The workspace is unreachable, never
	// lost, and nothing is created.
	before := containerCount(t, cli)
	d.Stop(t)
	if st := s.cliJSON("workspace", "check", "bot1"); st["state"] != "unreachable" {
		t.Fatalf("check with the daemon stopped: %v", st)
	}
	if r := s.cli("recovery", "offer", "bot1"); r.code == 0 {
		t.Fatalf("an offer while the daemon is down: %s", r.stdout)
	}
	d.Restart(t)
	if n := containerCount(t, cli); n != before {
		t.Fatalf("%d containers after the outage, %d before", n, before)
	}
	_, err = cli.ContainerStart(ctx, inst, client.ContainerStartOptions{}) // the daemon stopped it with itself
	must(t, err)
	good := s.cliJSON("capture", "--workspace", "bot1")
	if good["outcome"] != "captured" {
		t.Fatalf("capture after the outage: %v", good)
	}

	// Lost: the container is removed (its workspace kept aside to compare).
	want := filepath.Join(t.TempDir(), "want")
	pullTree(t, cli, inst, want)
	_, err = cli.ContainerRemove(ctx, inst, client.ContainerRemoveOptions{Force: true})
	must(t, err)
	if st := s.cliJSON("workspace", "check", "bot1"); st["state"] != "lost" {
		t.Fatalf("check: %v", st)
	}
	o := s.cliJSON("recovery", "offer", "bot1")
	if o["checkpoint"] != good["snapshot"] || o["profile"] != true {
		t.Fatalf("offer: %v", o)
	}
	for _, n := range o["not_recoverable"].([]any) {
		if s := n.(string); strings.Contains(s, "hard links") {
			t.Fatalf("the offer says docker cannot hold what it can: %s", s)
		}
	}
	op := s.cliJSON("recovery", "approve", "bot1", "--checkpoint", good["snapshot"].(string), "--wait")
	if op["step"] != "recovered" {
		t.Fatalf("recovery: %v\n%s", op, s.stderr)
	}
	repl := op["new_instance"].(string)
	got := filepath.Join(t.TempDir(), "got")
	pullTree(t, cli, repl, got)
	checkRecoveredTree(t, want, got, fx)
	if fi, err := os.Lstat(filepath.Join(got, "tool")); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("setuid tool: %v %v", fi, err)
	}
	w := s.cliJSON("workspace", "show", "bot1")
	if w["instance"] != repl || w["provider"] != "dock" {
		t.Fatalf("workspace after the recovery: %v", w)
	}
	s.stop()
}

// startContainer starts a container of the test image, as an operator
// would (not labelled as Lifeboat's), and returns its id.
func startContainer(t *testing.T, cli *client.Client, name string) string {
	t.Helper()
	ctx := context.Background()
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config:     &container.Config{Image: dockertest.Image, Cmd: dockertest.Command, WorkingDir: "/workspace"},
		HostConfig: &container.HostConfig{NetworkMode: "none"}})
	must(t, err)
	_, err = cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{})
	must(t, err)
	return res.ID
}

// dockSection is the TOML of a docker provider instance "dock" on the
// private dockerd d, running dockertest's image without a network.
func dockSection(d *dockertest.Daemon) string {
	return fmt.Sprintf(`[providers.dock]
type = "docker"
host = %q
image = %q
command = [%q, %q, %q]
network = "none"
`, d.Host, dockertest.Image, dockertest.Command[0], dockertest.Command[1], dockertest.Command[2])
}

// pushTree copies the local tree src into /workspace of a container
// through the archive endpoint, as `docker cp` does.
func pushTree(t *testing.T, cli *client.Client, id, src string) {
	t.Helper()
	root, err := os.OpenRoot(src)
	must(t, err)
	defer root.Close()
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(tartree.Write(context.Background(), root, pw, tartree.WriteOptions{Where: src, Prefix: "workspace"}))
	}()
	_, err = cli.CopyToContainer(context.Background(), id, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	must(t, err)
}

// pullTree copies /workspace of a container into dir.
func pullTree(t *testing.T, cli *client.Client, id, dir string) {
	t.Helper()
	res, err := cli.CopyFromContainer(context.Background(), id, client.CopyFromContainerOptions{SourcePath: "/workspace/."})
	must(t, err)
	defer res.Content.Close()
	must(t, os.MkdirAll(dir, 0o755))
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	must(t, tartree.Extract(context.Background(), res.Content, root, tartree.ExtractOptions{Where: dir, Owners: true}))
}

// execIn runs a shell command in the container's /workspace and returns
// its output.
func execIn(t *testing.T, cli *client.Client, id, script string) string {
	t.Helper()
	ctx := context.Background()
	cr, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{"sh", "-c", script}, WorkingDir: "/workspace", AttachStdout: true, AttachStderr: true})
	must(t, err)
	att, err := cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	must(t, err)
	defer att.Close()
	b, err := io.ReadAll(att.Reader)
	must(t, err)
	return string(b)
}

func containerCount(t *testing.T, cli *client.Client) int {
	t.Helper()
	l, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true})
	must(t, err)
	return len(l.Items)
}
