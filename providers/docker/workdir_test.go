package docker

import (
	"context"
	"strings"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

// TestMissingWorkdirSaysWhatToDo: ReadFiles of a container without its
// workspace directory is a conflict naming the directory and saying to
// create it or set the provider's workdir.
func TestMissingWorkdirSaysWhatToDo(t *testing.T) {
	p, id := newContainer(t, "no-workdir")
	ctx := context.Background()
	shell(t, p, id, "rm -rf /workspace")
	_, err := p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles without the workspace directory", err, providers.KindConflict)
	for _, want := range []string{"/workspace does not exist in container " + string(id), "mkdir -p /workspace", "set the provider's workdir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
