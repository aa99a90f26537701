package docker

import (
	"context"
	"strings"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/docker/dockertest"
	"lifeboat/providers/providertest"
)

// TestMissingWorkdirSaysWhatToDo: ReadFiles of a container without its
// workspace directory is a conflict naming the directory and saying to
// create it or set the provider's workdir.
func TestMissingWorkdirSaysWhatToDo(t *testing.T) {
	d := dockertest.Start(t)
	p := mustNew(t, testConfig(t, d))
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "no-workdir"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(ctx, id) })
	if res, err := p.Exec(ctx, id, []string{"rm", "-rf", "/workspace"}, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("rm: %v %s", err, res.Stderr)
	}
	_, err = p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles without the workspace directory", err, providers.KindConflict)
	for _, want := range []string{"/workspace does not exist in container " + string(id), "mkdir -p /workspace", "set the provider's workdir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
