package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"syscall"

	"github.com/minio/minio-go/v7"

	"lifeboat/backend"
)

// fail wraps err from op on what (a handle, or "" for the bucket),
// mapping S3 answers to the backend's sentinels: a missing object to
// backend.ErrNotFound, a refusal to fs.ErrPermission, a full store to
// backend.ErrNoSpace, and a server that could not be reached or kept
// failing after the retries to backend.ErrUnavailable. The S3 error code
// and message stay in the text; credentials are never in it.
func (b *Backend) fail(op string, what fmt.Stringer, err error) error {
	where := b.loc.String()
	if what != nil && what.String() != "" {
		where = what.String() + " in " + where
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("s3: %s %s: %w", op, where, err)
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == "NoSuchBucket":
		return fmt.Errorf("s3: %s %s: %w (bucket %q): %s", op, where, ErrNoBucket, b.loc.Bucket, describe(resp, err))
	case resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("s3: %s %s: %w", op, where, backend.ErrNotFound)
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized ||
		resp.Code == "AccessDenied" || resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch":
		return fmt.Errorf("s3: %s %s: %w: %s; check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or [repository] s3_access_key_id and its secret) and that they may use bucket %q",
			op, where, fs.ErrPermission, describe(resp, err), b.loc.Bucket)
	case resp.StatusCode == http.StatusInsufficientStorage || resp.Code == "XMinioStorageFull" || resp.Code == "StorageFull" || resp.Code == "QuotaExceeded":
		return fmt.Errorf("s3: %s %s: %w: %s; free space or raise the quota of bucket %q, then retry", op, where, backend.ErrNoSpace, describe(resp, err), b.loc.Bucket)
	case unavailable(resp, err):
		return fmt.Errorf("s3: %s %s: %w: %s; the request was retried; check that the server runs and is reachable, then run the command again",
			op, where, backend.ErrUnavailable, describe(resp, err))
	}
	return fmt.Errorf("s3: %s %s: %s", op, where, describe(resp, err))
}

// describe says what the server answered, or what the connection did.
func describe(resp minio.ErrorResponse, err error) string {
	if resp.Code != "" {
		s := fmt.Sprintf("the server answered %d %s", resp.StatusCode, resp.Code)
		if resp.Message != "" {
			s += " (" + resp.Message + ")"
		}
		return s
	}
	return err.Error()
}

// unavailable reports an answer or a failure a later try may not meet:
// 5xx, 429, throttling, and connections that failed or broke off.
func unavailable(resp minio.ErrorResponse, err error) bool {
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		return true
	case resp.Code == "SlowDown" || resp.Code == "RequestTimeout" || resp.Code == "InternalError" || resp.Code == "ServiceUnavailable":
		return true
	}
	return transportError(err)
}

// transportError reports a failure of the connection rather than an
// answer of the server.
func transportError(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// preconditionFailed reports a 412 to a conditional PUT.
func preconditionFailed(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode == http.StatusPreconditionFailed || resp.Code == "PreconditionFailed"
}
