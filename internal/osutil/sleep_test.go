package osutil

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Sleep returns nil after a full wait, and the context's error at once
// when the context ends first.
func TestSleep(t *testing.T) {
	t.Parallel()
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep of 1ms: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep of 1h with a cancelled context = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sleep of 1h under a 1ms deadline = %v, want context.DeadlineExceeded", err)
	}
}
