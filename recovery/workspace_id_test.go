package recovery

import (
	"errors"
	"strings"
	"testing"
)

// TestValidWorkspaceID: 1 to 128 letters, digits, '.', '_' or '-',
// starting with a letter or digit; anything else is ErrBadWorkspaceID.
func TestValidWorkspaceID(t *testing.T) {
	for _, id := range []string{"a", "Z", "0", "bot-1", "a.b_c-d", "9-", strings.Repeat("x", 128), "A" + strings.Repeat("._-", 42) + "z"} {
		if err := ValidWorkspaceID(id); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
	for _, id := range []string{"", ".a", "_a", "-a", "a/b", "../x", "a b", "a\n", "é", "a\x00", "a+b", "a:b", strings.Repeat("x", 129)} {
		if err := ValidWorkspaceID(id); !errors.Is(err, ErrBadWorkspaceID) {
			t.Errorf("%q: got %v, want ErrBadWorkspaceID", id, err)
		}
	}
}
