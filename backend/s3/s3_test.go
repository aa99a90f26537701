package s3

import (
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/backendtest"
	"lifeboat/internal/s3test"
)

// TestConformance runs the backend conformance suite against versitygw,
// in the bucket's root and under a prefix.
func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	t.Run("root", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) backend.Backend { return newTestBackend(t, srv, "") })
	})
	t.Run("prefix", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) backend.Backend { return newTestBackend(t, srv, "team/repo-1") })
	})
}
