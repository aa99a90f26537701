package osutil

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends: nil after the full wait, else
// ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
