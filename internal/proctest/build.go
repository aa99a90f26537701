package proctest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildLifeboat builds the lifeboat command (with the build tags given)
// into a temp dir of the test and returns the executable's path.
func BuildLifeboat(t testing.TB, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lifeboat")
	cmd := exec.Command("go", "build", "-tags", strings.Join(tags, ","), "-o", bin, "lifeboat/cmd/lifeboat")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
