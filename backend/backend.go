package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// FileType is the kind of object a file holds. Each type lives in its own
// namespace (a directory on the local filesystem, a key prefix on S3).
type FileType string

// File types of repository format v1.
const (
	Config   FileType = "config"    // the single file named "config"
	Key      FileType = "keys"      // key files
	Pack     FileType = "data"      // pack files (sharded by the first two hex chars of the name)
	Index    FileType = "index"     // index objects
	Snapshot FileType = "snapshots" // snapshot manifests
	Lock     FileType = "locks"     // lock objects
	Policy   FileType = "policies"  // retention policies, one per workspace
	Pin      FileType = "pins"      // snapshots the lifecycle holds, one per workspace
	// Condemned holds condemnation objects: packs a prune will delete
	// after a safety margin.
	Condemned FileType = "condemned"
	// Reserve holds blocks of random bytes that only take disk space,
	// released when the disk is full (repo.Repository.SetReserve).
	Reserve FileType = "reserve"
)

// FileTypes lists every file type in a fixed order.
var FileTypes = []FileType{Config, Key, Pack, Index, Snapshot, Lock, Policy, Pin, Condemned, Reserve}

// Handle names one file.
type Handle struct {
	Type FileType
	Name string // lowercase hex for every type but Config, whose name is "config"
}

func (h Handle) String() string {
	if h.Type == Config {
		return "config"
	}
	return string(h.Type) + "/" + h.Name
}

// FileInfo describes a stored file.
type FileInfo struct {
	Name string
	Size int64
}

// Sentinel errors. Implementations wrap them so callers test with errors.Is.
var (
	// ErrNotFound: the named file does not exist.
	ErrNotFound = errors.New("file not found")
	// ErrShortRead: a Load asked for bytes past the end of the file.
	ErrShortRead = errors.New("file shorter than requested range")
	// ErrNoSpace: the storage is full; nothing of the failed Save is visible.
	ErrNoSpace = errors.New("no space left on storage")
	// ErrExists: Save found a different config (or, for a name that is a
	// hash, an object of another size) stored under the handle, and left
	// it as it was.
	ErrExists = errors.New("a different file is stored under this name")
	// ErrUnavailable: the storage could not be reached, or kept failing
	// (S3: 5xx or throttling after the retries, a refused or broken
	// connection). Nothing half-written is visible; a later try may work.
	ErrUnavailable = errors.New("storage unavailable")
)

// Backend stores whole files under handles. It knows nothing of encryption
// or formats.
//
// Contract every implementation keeps (tested by backendtest.Run):
//   - Save is atomic and durable: when it returns nil the whole file is
//     stored and survives a crash or power loss (local: data and directory
//     fsynced; S3: PUT completed). When it returns an error, or the process
//     dies during it, either nothing or the complete file is visible under
//     the handle, never a partial one; callers treat a failed Save as "may
//     exist".
//   - Files other than config are named by the hash of their bytes, so
//     saving a name that exists stores the same bytes again: Save
//     succeeds and the file afterwards holds those bytes (local: an
//     atomic replacement; S3: the conditional PUT is refused with 412 and
//     the stored object is kept). A retried Save whose first try landed
//     is therefore harmless.
//   - The config is created once: Save of config when a config with
//     other bytes is stored fails with ErrExists and leaves it (local:
//     link(2); S3: If-None-Match: *), so two processes initialising one
//     location cannot both win; the same bytes again succeed.
//   - Save does not keep data after it returns; the caller may reuse it.
//   - Remove is durable when it returns nil.
//   - Negative offsets or lengths, and unknown file types, are errors.
//   - Load returns exactly length bytes starting at offset, or the rest of
//     the file when length is 0, in a new buffer the caller owns and may
//     overwrite (StreamPack decrypts blobs in it). A range past the end fails with
//     ErrShortRead; a missing file fails with ErrNotFound. A Load never
//     returns fewer bytes than asked without an error.
//   - Stat of a missing file fails with ErrNotFound. Remove of a missing
//     file either succeeds or fails with ErrNotFound (local: ErrNotFound;
//     S3 answers a DELETE of a missing object with 204 like any other,
//     and a HEAD before it would cost a request and still race another
//     remover); callers treat both as "gone".
//   - A refusal by the storage (file permissions, S3 credentials or
//     policy) wraps fs.ErrPermission; an unreachable or failing storage
//     wraps ErrUnavailable.
//   - List calls fn once per file of the type, in no particular order; it
//     sees every file whose Save returned before List began. An error from
//     fn stops the listing and is returned.
//   - All methods are safe for concurrent use and honour ctx cancellation.
type Backend interface {
	// Location describes where the backend stores data, for messages.
	Location() string
	Save(ctx context.Context, h Handle, data []byte) error
	Load(ctx context.Context, h Handle, offset int64, length int) ([]byte, error)
	Stat(ctx context.Context, h Handle) (FileInfo, error)
	List(ctx context.Context, t FileType, fn func(FileInfo) error) error
	Remove(ctx context.Context, h Handle) error
	Close() error
}

// LoaderInto is implemented by backends that can read a range into a
// caller's buffer (local and S3). Readers of many ranges, such as
// restore, use it through LoadRange to recycle their buffers.
type LoaderInto interface {
	// LoadInto reads len(dst) bytes of h from offset into dst, with the
	// errors Load gives for the same range.
	LoadInto(ctx context.Context, h Handle, offset int64, dst []byte) error
}

// LoadRange reads length (> 0) bytes of h from offset: into buf's storage
// when be is a LoaderInto and buf has the capacity, else into a new buffer
// from Load.
func LoadRange(ctx context.Context, be Backend, h Handle, offset int64, length int, buf []byte) ([]byte, error) {
	if li, ok := be.(LoaderInto); ok && length > 0 && cap(buf) >= length {
		if err := li.LoadInto(ctx, h, offset, buf[:length]); err != nil {
			return nil, err
		}
		return buf[:length], nil
	}
	return be.Load(ctx, h, offset, length)
}

// ReadFunc reads length bytes of h from offset (the rest of the file for
// 0) into the buffer alloc returns for the length it settled on. A backend
// writes its range read in this shape and gets Load and LoadInto from it.
type ReadFunc func(ctx context.Context, h Handle, offset int64, length int, alloc func(n int64) []byte) error

// Load is Backend.Load on read: into a new buffer.
func (read ReadFunc) Load(ctx context.Context, h Handle, offset int64, length int) ([]byte, error) {
	var buf []byte
	if err := read(ctx, h, offset, length, func(n int64) []byte { buf = make([]byte, n); return buf }); err != nil {
		return nil, err
	}
	return buf, nil
}

// LoadInto is LoaderInto.LoadInto on read. An empty dst is an error:
// length 0 would mean the rest of the file.
func (read ReadFunc) LoadInto(ctx context.Context, h Handle, offset int64, dst []byte) error {
	if len(dst) == 0 {
		return fmt.Errorf("load %s: empty range at offset %d", h, offset)
	}
	return read(ctx, h, offset, len(dst), func(int64) []byte { return dst })
}

// CheckList is the start of a List by the backend called name: a type
// that is not one of FileTypes is refused, and so is a done ctx, each
// error naming the backend.
func CheckList(ctx context.Context, name string, t FileType) error {
	if !slices.Contains(FileTypes, t) {
		return fmt.Errorf("%s: list: invalid file type %q", name, t)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: list %s: %w", name, t, err)
	}
	return nil
}

// ListConfig is List for the Config type, built on Stat: fn is called
// once when the config exists.
func ListConfig(ctx context.Context, b Backend, fn func(FileInfo) error) error {
	fi, err := b.Stat(ctx, Handle{Type: Config, Name: "config"})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return fn(fi)
}

// Valid reports whether h names a file this package can store.
func (h Handle) Valid() error {
	switch h.Type {
	case Config:
		if h.Name != "config" && h.Name != "" {
			return fmt.Errorf("invalid config handle name %q", h.Name)
		}
		return nil
	case Key, Pack, Index, Snapshot, Lock, Policy, Pin, Condemned, Reserve:
	default:
		return fmt.Errorf("invalid file type %q", h.Type)
	}
	if len(h.Name) < 2 || len(h.Name) > 128 {
		return fmt.Errorf("invalid %s name %q: want hex, 2-128 characters", h.Type, h.Name)
	}
	for _, c := range h.Name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("invalid %s name %q: want lowercase hex", h.Type, h.Name)
		}
	}
	return nil
}
