package recovery

import (
	"fmt"
	"testing"

	"lifeboat/backend"
)

// TestRetryableStorageOutage: a capture that failed because the
// repository's storage was unreachable (S3 down, SlowDown after the
// retries) is retryable; one that found the storage full is not.
func TestRetryableStorageOutage(t *testing.T) {
	if !Retryable(fmt.Errorf("saving data/ab: %w", backend.ErrUnavailable)) {
		t.Error("a storage outage is not retryable")
	}
	if Retryable(fmt.Errorf("saving data/ab: %w", backend.ErrNoSpace)) {
		t.Error("a full storage is retryable")
	}
}
