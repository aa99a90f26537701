package backend_test

import (
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
)

// As finds a backend, or an interface one implements, under decorators
// that unwrap, and reports false when none in the chain matches.
func TestAsUnwraps(t *testing.T) {
	lb, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := fault.Wrap(fault.Wrap(lb))
	if got, ok := backend.As[*local.Backend](wrapped); !ok || got != lb {
		t.Fatalf("As[*local.Backend] = %v, %v", got, ok)
	}
	if _, ok := backend.As[backend.TempCleaner](wrapped); !ok {
		t.Fatal("the local backend under two decorators is not found as a TempCleaner")
	}
	if _, ok := backend.As[*fault.TempFull](wrapped); ok {
		t.Fatal("As found a type that is not in the chain")
	}
}
