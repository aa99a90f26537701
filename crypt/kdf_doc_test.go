package crypt

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// docs/format.md and docs/keys.md state the argon2id defaults and bounds;
// they must be the ones this package uses.
func TestKDFDocumented(t *testing.T) {
	t.Parallel()
	for file, wants := range map[string][]string{
		"../docs/format.md": {
			fmt.Sprintf("| argon2id defaults | time %d, memory %d KiB, threads %d |", DefaultKDFTime, DefaultKDFMemoryKiB, DefaultKDFThreads),
			fmt.Sprintf("| argon2id bounds | time 1–%d; memory %d KiB–%d MiB and ≥ 8 KiB per thread; threads 1–255; salt %d bytes |",
				MaxKDFTime, MinKDFMemoryKiB, MaxKDFMemoryKiB>>10, saltSize),
			fmt.Sprintf("argon2id passes (default %d) | 1 to %d ", DefaultKDFTime, MaxKDFTime),
			fmt.Sprintf("argon2id memory in KiB (default %d) | %d to %d (%d MiB)", DefaultKDFMemoryKiB, MinKDFMemoryKiB, MaxKDFMemoryKiB, MaxKDFMemoryKiB>>10),
			fmt.Sprintf("argon2id lanes (default %d) | 1 to 255 |", DefaultKDFThreads),
			fmt.Sprintf("up to %d passes and %d KiB (1 GiB)", legacyMaxKDFTime, legacyMaxKDFMemoryKiB),
		},
		"../docs/keys.md": {
			fmt.Sprintf("at most %d passes over %d MiB", MaxKDFTime, MaxKDFMemoryKiB>>10),
			fmt.Sprintf("%d to %d KiB (%d MiB) with the default %d lanes", 8*DefaultKDFThreads, MaxKDFMemoryKiB, MaxKDFMemoryKiB>>10, DefaultKDFThreads),
			fmt.Sprintf("up to %d passes over %d GiB", legacyMaxKDFTime, legacyMaxKDFMemoryKiB>>20),
		},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not say %q", file, want)
			}
		}
	}
}
