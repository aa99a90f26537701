package repo

import "errors"

// Sentinel errors; cmd/lifeboat maps them to exit codes.
var (
	ErrNoRepository = errors.New("no repository found")
	ErrRepoExists   = errors.New("a repository already exists there")
	ErrNewerFormat  = errors.New("repository format is newer than this lifeboat supports")
	ErrBlobNotFound = errors.New("blob not found in the index")
	ErrPackMissing  = errors.New("pack named by the index is missing")
	ErrCorrupt      = errors.New("stored data is corrupt")
	ErrLastKey      = errors.New("refusing to remove the last key")
	ErrKeyInUse     = errors.New("refusing to remove the key in use")
	ErrKeyNotFound  = errors.New("no such key")
	ErrKeyAmbiguous = errors.New("key id prefix matches several keys")
	ErrNoUsableKey  = errors.New("no key file in the repository could be read")
	ErrClosed       = errors.New("repository is closed")
)

// ErrDamaged marks a snapshot that cannot be walked: its manifest or a
// tree it needs is missing or does not verify. snapshot.Reach returns it,
// and prune refuses to delete anything while a snapshot is damaged unless
// told to forget it.
var ErrDamaged = errors.New("damaged snapshot")
