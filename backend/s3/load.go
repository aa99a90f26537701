package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"

	"lifeboat/backend"
	"lifeboat/internal/osutil"
)

// Load returns length bytes of h from offset, or the rest of the object
// when length is 0, with one ranged GET. A body that breaks off is asked
// for again.
func (b *Backend) Load(ctx context.Context, h backend.Handle, offset int64, length int) ([]byte, error) {
	return backend.ReadFunc(b.load).Load(ctx, h, offset, length)
}

// LoadInto reads len(dst) bytes of h from offset into dst
// (backend.LoaderInto), with Load's checks.
func (b *Backend) LoadInto(ctx context.Context, h backend.Handle, offset int64, dst []byte) error {
	return backend.ReadFunc(b.load).LoadInto(ctx, h, offset, dst)
}

// errBrokenBody marks a response whose body ended before its length: the
// connection broke off, and another GET may succeed.
var errBrokenBody = errors.New("the response body broke off")

func (b *Backend) load(ctx context.Context, h backend.Handle, offset int64, length int, alloc func(n int64) []byte) error {
	if err := check(ctx, "load", h); err != nil {
		return err
	}
	if offset < 0 || length < 0 {
		return fmt.Errorf("s3: load %s: invalid range offset %d length %d", h, offset, length)
	}
	var err error
	for try := 1; ; try++ {
		err = b.loadOnce(ctx, h, offset, length, alloc)
		if err == nil || !errors.Is(err, errBrokenBody) || try >= b.tries {
			break
		}
		if werr := backoff(ctx, try); werr != nil {
			return fmt.Errorf("s3: load %s: %w", h, werr)
		}
	}
	if errors.Is(err, errBrokenBody) {
		return fmt.Errorf("s3: load %s in %s: %w: %w after %d tries; check the network to the server, then run the command again", h, b.loc, backend.ErrUnavailable, err, b.tries)
	}
	return err
}

// backoff waits before try+1: 100 ms, doubling, at most 2 s.
func backoff(ctx context.Context, try int) error {
	d := 100 * time.Millisecond << min(try-1, 5)
	return osutil.Sleep(ctx, min(d, 2*time.Second))
}

// loadOnce is one GET of the range.
func (b *Backend) loadOnce(ctx context.Context, h backend.Handle, offset int64, length int, alloc func(n int64) []byte) error {
	var opts minio.GetObjectOptions
	switch {
	case length > 0:
		_ = opts.SetRange(offset, offset+int64(length)-1)
	case offset > 0:
		_ = opts.SetRange(offset, 0)
	}
	body, info, hdr, err := b.core.GetObject(ctx, b.loc.Bucket, b.key(h), opts)
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusRequestedRangeNotSatisfiable {
			return b.outOfRange(ctx, h, offset, length, alloc)
		}
		return b.fail("load", h, err)
	}
	defer body.Close()
	n := info.Size // the body's length
	skip := int64(0)
	if opts.Header().Get("Range") != "" && hdr.Get("Content-Range") == "" {
		// The server ignored the range and sent the whole object.
		if offset > n {
			return b.shortRead(h, offset, int64(length), n)
		}
		skip, n = offset, n-offset
	}
	if length > 0 && n < int64(length) {
		return b.shortRead(h, offset, int64(length), offset+n)
	}
	if length > 0 {
		n = int64(length)
	}
	if skip > 0 {
		if _, err := io.CopyN(io.Discard, body, skip); err != nil {
			return b.broken(ctx, h, err)
		}
	}
	buf := alloc(n)
	if _, err := io.ReadFull(body, buf); err != nil {
		return b.broken(ctx, h, err)
	}
	return nil
}

// broken wraps a failure while reading a body: a cancelled context as it
// is, anything else as errBrokenBody, which load retries.
func (b *Backend) broken(ctx context.Context, h backend.Handle, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("s3: load %s: %w", h, ctx.Err())
	}
	return fmt.Errorf("s3: load %s: %w: %w", h, errBrokenBody, err)
}

// outOfRange answers a 416: the range starts at or past the end. Only
// "the rest from the very end" is a valid, empty result.
func (b *Backend) outOfRange(ctx context.Context, h backend.Handle, offset int64, length int, alloc func(n int64) []byte) error {
	fi, err := b.Stat(ctx, h)
	if err != nil {
		return err
	}
	if length == 0 && offset == fi.Size {
		alloc(0)
		return nil
	}
	return b.shortRead(h, offset, int64(length), fi.Size)
}

func (b *Backend) shortRead(h backend.Handle, offset, n, size int64) error {
	return fmt.Errorf("s3: load %s in %s: %w: want %d bytes at offset %d, the object has %d", h, b.loc, backend.ErrShortRead, n, offset, size)
}

// Stat returns the size of h.
func (b *Backend) Stat(ctx context.Context, h backend.Handle) (backend.FileInfo, error) {
	if err := check(ctx, "stat", h); err != nil {
		return backend.FileInfo{}, err
	}
	info, err := b.client.StatObject(ctx, b.loc.Bucket, b.key(h), minio.StatObjectOptions{})
	if err != nil {
		return backend.FileInfo{}, b.fail("stat", h, err)
	}
	return backend.FileInfo{Name: name(h), Size: info.Size}, nil
}
