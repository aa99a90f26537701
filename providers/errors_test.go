package providers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	base := &Error{Provider: "e2b", Op: "inspect", Instance: "sb-1", Kind: KindRateLimited, Code: "429", RetryAfter: 3 * time.Second, Err: context.DeadlineExceeded}
	err := fmt.Errorf("lifecycle: %w", base)
	if !errors.Is(err, ErrRateLimited) || errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("errors.Is through wrapping: %v", err)
	}
	if KindOf(err) != KindRateLimited || KindOf(errors.New("x")) != "" {
		t.Fatalf("KindOf: %q", KindOf(err))
	}
	if d, ok := RetryAfter(err); !ok || d != 3*time.Second {
		t.Fatalf("RetryAfter = %v, %v", d, ok)
	}
	if _, ok := RetryAfter(&Error{Kind: KindUnavailable}); ok {
		t.Fatal("RetryAfter on an outage")
	}
	want := "e2b: inspect sb-1: rate_limited (429), retry after 3s: context deadline exceeded"
	if base.Error() != want {
		t.Fatalf("Error() = %q, want %q", base.Error(), want)
	}
}
