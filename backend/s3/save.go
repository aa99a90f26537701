package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/minio/minio-go/v7"

	"lifeboat/backend"
)

// Save stores data under h with one conditional PUT (If-None-Match: *).
// A 412 answer means an object is already stored under h: for a name that
// is the hash of its bytes that is these bytes (a lost answer to an
// earlier try of this PUT, or another writer's same blob), and Save
// succeeds once Stat confirms the size. For the config it succeeds when
// the stored config has the same bytes and fails with backend.ErrExists
// otherwise. When every try failed without an answer (or with a 5xx),
// Save still succeeds if the object it meant to store is there.
func (b *Backend) Save(ctx context.Context, h backend.Handle, data []byte) error {
	if err := check(ctx, "save", h); err != nil {
		return err
	}
	return b.put(ctx, h, bytes.NewReader(data), int64(len(data)), data)
}

// put uploads size bytes from r (which must be seekable, so retries can
// rewind it) under h. data holds the same bytes for the config, whose
// 412 is checked against them; it is nil for the other types.
func (b *Backend) put(ctx context.Context, h backend.Handle, r io.Reader, size int64, data []byte) error {
	opts := minio.PutObjectOptions{DisableMultipart: true, ContentType: "application/octet-stream"}
	opts.SetMatchETagExcept("*")
	_, err := b.client.PutObject(ctx, b.loc.Bucket, b.key(h), r, size, opts)
	if err == nil {
		return nil
	}
	if !preconditionFailed(err) {
		if unavailable(minio.ToErrorResponse(err), err) && b.landed(ctx, h, size, data) {
			// An earlier try stored it, and every answer after that was
			// lost: a server that refuses the retry (412) before reading
			// its body resets the connection under it.
			return nil
		}
		return b.fail("save", h, err)
	}
	if h.Type == backend.Config {
		stored, lerr := b.Load(ctx, h, 0, 0)
		if lerr != nil {
			return fmt.Errorf("s3: save %s: a config is stored already, and reading it failed: %w", h, lerr)
		}
		if !bytes.Equal(stored, data) {
			return fmt.Errorf("s3: save %s in %s: %w: another config is stored there (a repository exists)", h, b.loc, backend.ErrExists)
		}
		return nil
	}
	fi, serr := b.Stat(ctx, h)
	if serr != nil {
		return fmt.Errorf("s3: save %s: the server refused to replace it (412), and checking it failed: %w", h, serr)
	}
	if fi.Size != size {
		return fmt.Errorf("s3: save %s in %s: %w: an object of %d bytes is stored under this name, this one has %d; names are hashes of content, so one of them is damaged (run `lifeboat check --read-data`)",
			h, b.loc, backend.ErrExists, fi.Size, size)
	}
	return nil
}

// landed reports whether an object of size bytes (for the config, these
// bytes) is stored under h, after a PUT whose tries all failed.
func (b *Backend) landed(ctx context.Context, h backend.Handle, size int64, data []byte) bool {
	if h.Type == backend.Config {
		stored, err := b.Load(ctx, h, 0, 0)
		return err == nil && bytes.Equal(stored, data)
	}
	fi, err := b.Stat(ctx, h)
	return err == nil && fi.Size == size
}

// tempFile is a pack being written before its upload. Its name is
// unlinked at creation: the open file is all there is, so a killed process
// leaves nothing behind.
type tempFile struct {
	*os.File
	name string
}

func (t *tempFile) Name() string { return t.name }

// Sync does nothing: the file only feeds the upload, and the PUT is what
// makes the pack durable.
func (t *tempFile) Sync() error { return nil }

// CreateTemp returns a new temp file for a pack (backend.TempSaver).
func (b *Backend) CreateTemp() (backend.TempFile, error) {
	f, err := os.CreateTemp(b.tempDir, "lifeboat-pack-*")
	if err != nil {
		return nil, b.tempErr(err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, b.tempErr(err)
	}
	return &tempFile{f, f.Name()}, nil
}

// Write maps a full disk met while writing to backend.ErrNoSpace.
func (t *tempFile) Write(p []byte) (int, error) {
	n, err := t.File.Write(p)
	if err != nil && isNoSpace(err) {
		err = fmt.Errorf("s3: writing a pack's temp file in %s: %w: %w; free space there or set TMPDIR (or the config's s3_temp_dir) to a larger disk", filepath.Dir(t.name), backend.ErrNoSpace, err)
	}
	return n, err
}

func (b *Backend) tempErr(err error) error {
	if isNoSpace(err) {
		return fmt.Errorf("s3: creating a pack's temp file in %s: %w: %w", b.tempDir, backend.ErrNoSpace, err)
	}
	return fmt.Errorf("s3: creating a pack's temp file in %s: %w", b.tempDir, err)
}

// SaveTemp uploads what was written to f under h with one conditional PUT
// streamed from the file, then closes it (backend.TempSaver).
func (b *Backend) SaveTemp(ctx context.Context, h backend.Handle, f backend.TempFile) error {
	t, ok := f.(*tempFile)
	if !ok {
		f.Close()
		return fmt.Errorf("s3: save %s: the temp file was not made by this backend", h)
	}
	defer t.Close()
	if err := check(ctx, "save", h); err != nil {
		return err
	}
	fi, err := t.Stat()
	if err != nil {
		return fmt.Errorf("s3: save %s: temp file: %w", h, err)
	}
	if _, err := t.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("s3: save %s: temp file: %w", h, err)
	}
	// A section reader: seekable (minio-go rewinds it for a retry) and
	// never more than the file's size.
	return b.put(ctx, h, io.NewSectionReader(t.File, 0, fi.Size()), fi.Size(), nil)
}

// DiscardTemp closes a temp file that will not be saved.
func (b *Backend) DiscardTemp(f backend.TempFile) { f.Close() }

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
