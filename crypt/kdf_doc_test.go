package crypt

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// docs/format.md states the argon2id defaults and bounds; they must be the
// ones this package uses.
func TestKDFDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/format.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{
		fmt.Sprintf("| argon2id defaults | time %d, memory %d KiB, threads %d |", DefaultKDFTime, DefaultKDFMemoryKiB, DefaultKDFThreads),
		fmt.Sprintf("| argon2id bounds | time 1–%d; memory %d KiB–%d GiB and ≥ 8 KiB per thread; threads 1–255; salt %d bytes |",
			maxKDFTime, minKDFMemoryKiB, maxKDFMemoryKiB>>20, saltSize),
		fmt.Sprintf("argon2id passes (default %d) | 1 to %d |", DefaultKDFTime, maxKDFTime),
		fmt.Sprintf("argon2id memory in KiB (default %d) | %d to %d (1 GiB)", DefaultKDFMemoryKiB, minKDFMemoryKiB, maxKDFMemoryKiB),
		fmt.Sprintf("argon2id lanes (default %d) | 1 to 255 |", DefaultKDFThreads),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/format.md does not say %q", want)
		}
	}
}
