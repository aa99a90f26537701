package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCaptureBadExclude: a malformed glob or an empty pattern is refused
// with ErrBadExclude (the CLI's usage code 2) naming the pattern, before
// anything is captured, also in a capture that looks for profiles.
func TestCaptureBadExclude(t *testing.T) {
	t.Parallel()
	r := capTestOpenRepo(t)
	src := t.TempDir()
	capTestWrite(t, src, map[string]string{"a": "x", "b/c": "y"})
	for _, pat := range []string{"[bad", "a/[b", "*[", "[^]", `x\`, "/", ""} {
		o := capTestOptions(nil)
		o.Excludes = []string{"ok*", pat}
		_, err := Run(context.Background(), r, src, o)
		if !errors.Is(err, ErrBadExclude) || !strings.Contains(err.Error(), fmt.Sprintf("%q", pat)) {
			t.Errorf("exclude %q: %v; want ErrBadExclude naming it", pat, err)
		}
	}
	o := capTestOptions(nil)
	o.Excludes = []string{"[bad"}
	o.Sensitive = []SensitiveSpec{{Path: "b", Kind: "chromium"}}
	if _, err := Run(context.Background(), r, src, o); !errors.Is(err, ErrBadExclude) {
		t.Errorf("with a sensitive tree: %v; want ErrBadExclude", err)
	}
	capTestNoSnapshots(t, r)
	// Valid patterns of every form still capture.
	o = capTestOptions(nil)
	o.Excludes = []string{"[xy]", `\[x`, "b/*"}
	capTestCapture(t, r, src, o)
}
