package repo

import (
	"context"
	"fmt"
)

type warnKey struct{}

// WithWarn returns a context under which repository operations tell warn
// what they have to say to the user while they go on (a key file set
// aside when the repository is opened). The repository package never
// prints: without WithWarn such warnings are dropped, and what they say
// stays available elsewhere (`Keys` marks the key files set aside).
func WithWarn(ctx context.Context, warn func(msg string)) context.Context {
	return context.WithValue(ctx, warnKey{}, warn)
}

// Warnf passes a warning to the function WithWarn put in ctx, if any:
// what the packages above the repository (capture) have to say while they
// go on reaches the user the same way.
func Warnf(ctx context.Context, format string, args ...any) {
	if w, ok := ctx.Value(warnKey{}).(func(string)); ok && w != nil {
		w(fmt.Sprintf(format, args...))
	}
}
