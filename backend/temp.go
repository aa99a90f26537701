package backend

import "context"

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
