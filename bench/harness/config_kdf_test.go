package harness

import (
	"fmt"
	"strings"
	"testing"

	"lifeboat/crypt"
)

// The configuration every run prints states lifeboat's argon2id default as
// it is, not as it was.
func TestLifeboatConfigKDF(t *testing.T) {
	cfg := (&lifeboatDriver{}).tool().Config
	want := fmt.Sprintf("argon2id %d MiB key", crypt.DefaultKDFMemoryKiB>>10)
	if !strings.Contains(cfg, want) {
		t.Errorf("lifeboat's printed configuration %q does not say %q", cfg, want)
	}
}
