package backend

import (
	"context"
	"time"
)

// TempFile is a file a TempSaver handed out to be filled before it is
// saved.
type TempFile interface {
	Write(p []byte) (int, error)
	Name() string
	Sync() error
	Close() error
}

// TempSaver is implemented by backends that can store a file the caller
// wrote beforehand into a temp file they provide. The repository builds
// packs that way, so their bytes go to the disk as a pack fills, not into
// memory it holds; backends without it get packs as byte slices through
// Save.
type TempSaver interface {
	// CreateTemp returns a new, empty temp file.
	CreateTemp() (TempFile, error)
	// SaveTemp stores what was written to f under h, with the guarantees
	// of Save (atomic, durable; on error nothing is visible under h). It
	// consumes f whatever the outcome: f must not be used afterwards.
	SaveTemp(ctx context.Context, h Handle, f TempFile) error
	// DiscardTemp closes and removes a temp file that will not be saved.
	DiscardTemp(f TempFile)
}

// TempCleaner is implemented by backends that can remove the temp files
// of saves a killed or crashed process left behind (local: its tmp/).
type TempCleaner interface {
	// CleanTemp removes such files last modified more than olderThan ago
	// and not in use by a live writer, and returns how many it removed.
	// olderThan must be far longer than any single save takes.
	CleanTemp(ctx context.Context, olderThan time.Duration) (int, error)
}

// As finds a backend of type T (a concrete type or an interface such as
// TempCleaner) in be or under the decorators that wrap it: a decorator
// gives its inner backend by an Unwrap() Backend method.
func As[T any](be Backend) (T, bool) {
	for {
		if t, ok := be.(T); ok {
			return t, true
		}
		u, ok := be.(interface{ Unwrap() Backend })
		if !ok {
			var zero T
			return zero, false
		}
		be = u.Unwrap()
	}
}
