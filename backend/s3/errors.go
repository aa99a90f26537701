package s3

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"syscall"

	"github.com/minio/minio-go/v7"

	"lifeboat/backend"
)

// ErrRefused: the server refused the credentials (an access key id it
// does not know, a wrong secret) or this request (a policy): a 403, or
// versitygw's 404 XAdminUserNotFound. It wraps fs.ErrPermission and, unlike
// a local file that cannot be read, stands for the whole repository: the
// same credentials are refused everywhere in it.
var ErrRefused = fmt.Errorf("%w", fs.ErrPermission)

// fail wraps err from op on what (a handle, or "" for the bucket),
// mapping S3 answers to the backend's sentinels: a missing object to
// backend.ErrNotFound, a refusal to ErrRefused (so fs.ErrPermission), a
// full store to backend.ErrNoSpace, and a server that could not be
// reached or kept failing after the retries to backend.ErrUnavailable.
// The S3 error code and message stay in the text; credentials are never
// in it.
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
	case unknownAccessKey(resp):
		// Checked before the 404s: versitygw answers an unknown key id
		// with 404 XAdminUserNotFound, which is not a missing object.
		return fmt.Errorf("s3: %s %s: %w: %s: the server does not know this access key id; check the access key id (AWS_ACCESS_KEY_ID, or [repository] s3_access_key_id) and its secret",
			op, where, ErrRefused, describe(resp, err))
	case resp.Code == "NoSuchBucket":
		return fmt.Errorf("s3: %s %s: %w (bucket %q): %s", op, where, ErrNoBucket, b.loc.Bucket, describe(resp, err))
	case resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("s3: %s %s: %w", op, where, backend.ErrNotFound)
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized ||
		resp.Code == "AccessDenied" || resp.Code == "SignatureDoesNotMatch":
		return fmt.Errorf("s3: %s %s: %w: %s; check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or [repository] s3_access_key_id and its secret) and that they may use bucket %q",
			op, where, ErrRefused, describe(resp, err), b.loc.Bucket)
	case resp.StatusCode == http.StatusInsufficientStorage || resp.Code == "XMinioStorageFull" || resp.Code == "StorageFull" || resp.Code == "QuotaExceeded":
		return fmt.Errorf("s3: %s %s: %w: %s; free space or raise the quota of bucket %q, then retry", op, where, backend.ErrNoSpace, describe(resp, err), b.loc.Bucket)
	case unavailable(resp, err):
		tried := "the request was not retried"
		if b.tries > 1 && retried(resp, err) {
			tried = fmt.Sprintf("the request was tried up to %d times", b.tries)
		}
		return fmt.Errorf("s3: %s %s: %w: %s; %s; check that the server runs and is reachable, then run the command again",
			op, where, backend.ErrUnavailable, describe(resp, err), tried)
	}
	return fmt.Errorf("s3: %s %s: %s", op, where, describe(resp, err))
}

// unknownAccessKey reports an answer that the access key id is not
// known: InvalidAccessKeyId (AWS, MinIO), XAdminUserNotFound (versitygw,
// with a 404).
func unknownAccessKey(resp minio.ErrorResponse) bool {
	return resp.Code == "InvalidAccessKeyId" || resp.Code == "XAdminUserNotFound"
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

// retried reports whether a request that failed with err was retried
// (up to Config.MaxRetries tries): minio-go retries a broken connection
// unless the certificate is not trusted or the server does not speak
// TLS, and answers with a retryable status or S3 code; Open's region
// lookup (lookupRegion) retries what minio-go does. Other failures,
// 501 Not Implemented for one, fail at the first try.
func retried(resp minio.ErrorResponse, err error) bool {
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, 499, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, 520:
		return true
	}
	switch resp.Code {
	case "RequestError", "RequestTimeout", "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled",
		"InternalError", "SlowDown", "SlowDownWrite", "SlowDownRead":
		return true
	}
	if resp.Code != "" || resp.StatusCode != 0 {
		return false
	}
	var unknownCA x509.UnknownAuthorityError
	var ue *url.Error
	if errors.As(err, &unknownCA) || (errors.As(err, &ue) && ue.Err != nil && ue.Err.Error() == "http: server gave HTTP response to HTTPS client") {
		return false
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
