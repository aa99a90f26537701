package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"lifeboat/providers"
	"lifeboat/providers/docker/dockertest"
	"lifeboat/providers/providertest"
)

func testConfig(t *testing.T, d *dockertest.Daemon) Config {
	return Config{Host: d.Host, Image: dockertest.Image, Command: dockertest.Command, Network: "none",
		CacheDir: t.TempDir(), Labels: map[string]string{"test": t.Name()}}
}

func mustNew(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p := providertest.MustNew(t, New, cfg)
	t.Cleanup(func() { p.Close() })
	return p
}

// newContainer starts a daemon and a provider on it, and creates one
// container (destroyed at the end of the test).
func newContainer(t *testing.T, key string) (*Provider, providers.InstanceID) {
	t.Helper()
	return newContainerOn(t, dockertest.Start(t), key)
}

// newContainerOn is newContainer on the daemon d.
func newContainerOn(t *testing.T, d *dockertest.Daemon, key string) (*Provider, providers.InstanceID) {
	t.Helper()
	p := mustNew(t, testConfig(t, d))
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(ctx, id) })
	return p, id
}

// shell runs script in the container; it must succeed.
func shell(t *testing.T, p *Provider, id providers.InstanceID, script string) {
	t.Helper()
	if res, err := p.Exec(context.Background(), id, []string{"sh", "-c", script}, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v %s", script, err, res.Stderr)
	}
}

func harness(t *testing.T, d *dockertest.Daemon, cfg Config) providertest.Harness {
	cli := d.Client(t)
	return providertest.Harness{
		New: func(t *testing.T) providers.Provider { return mustNew(t, cfg) },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) {
			if _, err := cli.ContainerRemove(context.Background(), string(id), client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		},
		Unreachable: func(t *testing.T) providers.Provider {
			down := cfg
			down.Host = "unix://" + t.TempDir() + "/no-daemon.sock"
			return mustNew(t, down)
		},
		Absent: "never-created",
		Peek:   func(t *testing.T) string { return peek(t, cli) },
		DenyWrites: func(t *testing.T) string {
			// The immutable attribute, set from this host on the staging
			// directory in the upper layer of every running container (the
			// suite has just created its instance).
			l, err := cli.ContainerList(context.Background(), client.ContainerListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range l.Items {
				ins, err := cli.ContainerInspect(context.Background(), c.ID, client.ContainerInspectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				upper := ins.Container.GraphDriver.Data["UpperDir"]
				if upper == "" {
					return ""
				}
				dir := filepath.Join(upper, stagingDir)
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if !providertest.DenyWrites(t, dir) {
					return ""
				}
			}
			return stagingDir
		},
	}
}

// peek lists every container and, for each, the names and sizes under
// /.lifeboat and /workspace (through the archive endpoint, so stopped
// containers are listed too).
func peek(t *testing.T, cli *client.Client) string {
	ctx := context.Background()
	l, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range l.Items {
		out = append(out, "container "+c.ID)
		for _, dir := range []string{metaDir, "/workspace"} {
			res, err := cli.CopyFromContainer(ctx, c.ID, client.CopyFromContainerOptions{SourcePath: dir})
			if err != nil {
				out = append(out, dir+": "+err.Error())
				continue
			}
			tr := tar.NewReader(res.Content)
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				out = append(out, fmt.Sprintf("%s %d %o %s", h.Name, h.Size, h.Mode, h.ModTime))
			}
			res.Content.Close()
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestConformance runs the providers conformance suite against a private
// dockerd.
func TestConformance(t *testing.T) {
	d := dockertest.Start(t)
	cfg := testConfig(t, d)
	p := mustNew(t, cfg)
	v, err := p.APIVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("API version negotiated with the daemon: %s", v)
	providertest.Run(t, harness(t, d, cfg))
}

// TestPauseStopAndCheckpoints: Pause freezes the container (Inspect says
// Stopped, the archive endpoint still reads it, Exec is refused), Resume
// thaws it; a checkpoint image a rolled-back container runs from is
// untagged by DeleteCheckpoint and removed with that container; Stop
// leaves a Stopped container whose files are still readable.
func TestPauseStopAndCheckpoints(t *testing.T) {
	d := dockertest.Start(t)
	p, id := newContainerOn(t, d, "pause")
	cli := d.Client(t)
	ctx := context.Background()
	if _, err := p.Exec(ctx, id, []string{"sh", "-c", "echo one > f"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := p.Pause(ctx, id); err != nil {
			t.Fatalf("Pause #%d: %v", i+1, err)
		}
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Stopped {
		t.Fatalf("Inspect of a paused container = %+v, %v", st, err)
	}
	f, err := p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatalf("ReadFiles of a paused container: %v", err)
	}
	f.Close()
	_, err = p.Exec(ctx, id, []string{"true"}, nil)
	providertest.WantKind(t, "Exec in a paused container", err, providers.KindConflict)
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatalf("Checkpoint of a paused container: %v", err)
	}
	for i := range 2 {
		if err := p.Resume(ctx, id); err != nil {
			t.Fatalf("Resume #%d: %v", i+1, err)
		}
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("Inspect after Resume = %+v, %v", st, err)
	}

	rb, err := p.Rollback(ctx, id, cp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(ctx, rb) })
	if st, _ := p.Inspect(ctx, id); st.State != providers.Missing {
		t.Fatalf("the container Lifeboat made and rolled back is still there: %+v", st)
	}
	res, err := p.Exec(ctx, rb, []string{"cat", "f"}, nil)
	if err != nil || string(res.Stdout) != "one\n" {
		t.Fatalf("rolled-back container: %q %v", res.Stdout, err)
	}
	img, err := cli.ImageInspect(ctx, string(cp))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteCheckpoint(ctx, cp); err != nil {
		t.Fatalf("DeleteCheckpoint of an image a container runs from: %v", err)
	}
	if _, err := cli.ImageInspect(ctx, string(cp)); err == nil {
		t.Fatal("the checkpoint's tag survived DeleteCheckpoint")
	}
	if err := p.Destroy(ctx, rb); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ImageInspect(ctx, img.ID); err == nil {
		t.Fatal("the untagged checkpoint image survived the container that ran from it")
	}

	st, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "stop"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(ctx, st) })
	for i := range 2 {
		if err := p.Stop(ctx, st); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	if s, err := p.Inspect(ctx, st); err != nil || s.State != providers.Stopped {
		t.Fatalf("Inspect after Stop = %+v, %v", s, err)
	}
	if f, err := p.ReadFiles(ctx, st); err != nil {
		t.Fatalf("ReadFiles of a stopped container: %v", err)
	} else {
		f.Close()
	}
	err = p.Stop(ctx, "never-created")
	providertest.WantKind(t, "Stop of an absent container", err, providers.KindConflict)
}

// TestTLS: over tcp:// with TLS the provider works with the client
// certificate the daemon trusts; one another CA signed is refused as
// unauthorized (never missing, never unavailable), and so is a daemon
// certificate the provider's CA did not sign.
func TestTLS(t *testing.T) {
	d := dockertest.StartTLS(t)
	ctx := context.Background()
	cfg := testConfig(t, d)
	cfg.Host, cfg.CAFile, cfg.CertFile, cfg.KeyFile = d.TCPHost, d.ClientTLS.CA, d.ClientTLS.Cert, d.ClientTLS.Key
	p := mustNew(t, cfg)
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "tls"})
	if err != nil {
		t.Fatalf("Create over TLS: %v", err)
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("Inspect over TLS: %+v %v", st, err)
	}
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]dockertest.TLSFiles{
		"a client certificate the daemon does not trust":   d.RogueTLS,
		"a daemon certificate the provider does not trust": {CA: d.RogueTLS.Cert, Cert: d.ClientTLS.Cert, Key: d.ClientTLS.Key},
	} {
		bad := cfg
		bad.CAFile, bad.CertFile, bad.KeyFile = f.CA, f.Cert, f.Key
		_, err := mustNew(t, bad).Inspect(ctx, id)
		providertest.WantKind(t, "Inspect with "+name, err, providers.KindUnauthorized)
		t.Logf("%s: %v", name, err)
	}
}
