package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// classify is the adapter's one table from daemon answers and transport
// failures to provider kinds (documented in docs/providers.md):
//
//	ctx done, timeout                         unavailable (context / timeout)
//	daemon not answering (socket absent,
//	  connection refused or lost, DNS)         unavailable (connect)
//	401, 403, TLS handshake refused,
//	  socket not accessible to this user       unauthorized (401/403/tls/socket permission)
//	429                                        rate_limited (429)
//	404 (data plane)                           conflict (404): Inspect decides
//	409                                        conflict (409)
//	400, 422                                   invalid (400)
//	EACCES/EPERM at an entry of a tree         permission (the entry is named)
//	socket, device in a tree                   unsupported (the entry is named)
//	5xx, anything else                         unavailable
//
// Only Inspect turns a 404 into Missing, and only a "No such container"
// (noSuchContainer).
func classify(err error) (providers.Kind, string) {
	var cc *fsmeta.CannotCreate
	var ee *fsmeta.EntryError
	var ne net.Error
	var dnsErr *net.DNSError
	var oe *net.OpError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return providers.KindUnavailable, "context"
	case isTLSFailure(err):
		return providers.KindUnauthorized, "tls"
	case errors.As(err, &cc):
		return providers.KindUnsupported, fsmeta.TypeName(cc.Type)
	case errors.As(err, &ee) && fsmeta.IsPermission(ee.Err):
		return providers.KindPermission, "EACCES"
	case client.IsErrConnectionFailed(err) && strings.Contains(err.Error(), "permission denied"):
		return providers.KindUnauthorized, "socket permission"
	case client.IsErrConnectionFailed(err), errors.As(err, &oe), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &dnsErr):
		return providers.KindUnavailable, "connect"
	case cerrdefs.IsUnauthorized(err):
		return providers.KindUnauthorized, "401"
	case cerrdefs.IsPermissionDenied(err):
		return providers.KindUnauthorized, "403"
	case cerrdefs.IsResourceExhausted(err):
		return providers.KindRateLimited, "429"
	case cerrdefs.IsNotFound(err):
		return providers.KindConflict, "404"
	case cerrdefs.IsConflict(err):
		return providers.KindConflict, "409"
	case cerrdefs.IsInvalidArgument(err):
		return providers.KindInvalid, "400"
	case errors.As(err, &ne) && ne.Timeout():
		return providers.KindUnavailable, "timeout"
	case cerrdefs.IsInternal(err), cerrdefs.IsUnavailable(err):
		return providers.KindUnavailable, "5xx"
	}
	return providers.KindUnavailable, ""
}

// isTLSFailure: the daemon refused our client certificate, or we refused
// its certificate.
func isTLSFailure(err error) bool {
	s := err.Error()
	return strings.Contains(s, "tls: ") || strings.Contains(s, "x509: ")
}

func wrap(op string, id providers.InstanceID, err error) error {
	return providers.Wrap(Name, op, id, err, classify)
}

func newErr(op string, id providers.InstanceID, k providers.Kind, format string, args ...any) error {
	return providers.Errorf(Name, op, id, k, format, args...)
}

// ctxErr prefers ctx's error over the transport error a cancelled call
// produces.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// noSuchContainer is the daemon's confirmed absence of a container: a 404
// whose message is the daemon's own "No such container" (a 404 from
// anything else in the way, a proxy, says nothing about the container).
func noSuchContainer(err error) bool {
	return cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(err.Error()), "no such container")
}

// noSuchImage is the daemon's "No such image" (create, rollback, delete).
func noSuchImage(err error) bool {
	return cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(err.Error()), "no such image")
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
func isConflict(err error) bool { return cerrdefs.IsConflict(err) }
