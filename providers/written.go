package providers

import "context"

type writeStartedKey struct{}

// WithWriteStarted returns a context that carries fn, for a caller that
// must know whether a WriteFiles or Switch had begun changing the instance
// when it failed (a copy-back that fails after writing started is never
// retried). fn may be called several times and from any goroutine, so it
// must be idempotent (dirlock.Attempt.Writing is). A fn already carried by
// ctx is called as well, before fn.
func WithWriteStarted(ctx context.Context, fn func()) context.Context {
	if prev, ok := ctx.Value(writeStartedKey{}).(func()); ok {
		inner := fn
		fn = func() { prev(); inner() }
	}
	return context.WithValue(ctx, writeStartedKey{}, fn)
}

// WriteStarted tells the caller that set WithWriteStarted that the adapter
// is about to make its first change inside the instance. Adapters call it
// right before that change; it does nothing when no fn was set, and
// calling it many times is fine.
func WriteStarted(ctx context.Context) {
	if fn, ok := ctx.Value(writeStartedKey{}).(func()); ok && fn != nil {
		fn()
	}
}
