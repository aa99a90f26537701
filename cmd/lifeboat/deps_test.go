package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The lifeboat binary links no tooling: not the benchmark harness, not
// the memory sampler of the measuring tools, not the test fixture's
// LevelDB (nor the LevelDB library), and no test support package. (The
// small utilities of internal/osutil and internal/keylock are the
// product's own.)
func TestBinaryLinksNoTooling(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "lifeboat/cmd/lifeboat").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps gave %d packages: %q", len(deps), deps)
	}
	banned := []string{"lifeboat/bench/harness", "lifeboat/internal/memsample", "lifeboat/internal/s3test",
		"lifeboat/internal/storetest", "lifeboat/internal/chromiumtest", "lifeboat/profile/fixture/localstorage",
		"lifeboat/profile/profiletest", "github.com/syndtr/goleveldb", "testing"}
	for _, d := range deps {
		for _, b := range banned {
			if d == b || strings.HasPrefix(d, strings.TrimSuffix(b, "/")+"/") {
				t.Errorf("the lifeboat binary links %s", d)
			}
		}
	}
}
