package ssh

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/pkg/sftp"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// errHostKey marks a host-key refusal found by the callback.
type hostKeyError struct {
	code string // "host-key-mismatch", "host-key-unknown" or "known-hosts" (the file unreadable)
	err  error
}

func (e *hostKeyError) Error() string { return e.err.Error() }
func (e *hostKeyError) Unwrap() error { return e.err }

// classify is the adapter's one table from SSH, SFTP and network failures
// to provider kinds (documented in docs/providers.md):
//
//	host key mismatch / unknown host       unauthorized (host-key-mismatch / host-key-unknown)
//	known_hosts unreadable or malformed    unauthorized (known-hosts)
//	"ssh: unable to authenticate"          unauthorized (auth)
//	SFTP permission denied                 permission (SSH_FX_PERMISSION_DENIED)
//	EACCES/EPERM at an entry of a tree     permission (the entry is named)
//	socket, device (fifo without GNU tar)  unsupported (the entry is named)
//	connection refused, unreachable, DNS   unavailable (dial)
//	timeout, ctx done                      unavailable (timeout / context)
//	connection lost, EOF, other SSH/SFTP   unavailable
//	SFTP no such file (data plane)         conflict (the caller Inspects)
//	SFTP op unsupported by the server      unsupported
func classify(err error) (providers.Kind, string) {
	var hk *hostKeyError
	var ne net.Error
	var st *sftp.StatusError
	var dnsErr *net.DNSError
	var cc *fsmeta.CannotCreate
	var ee *fsmeta.EntryError
	switch {
	case errors.As(err, &hk):
		return providers.KindUnauthorized, hk.code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return providers.KindUnavailable, "context"
	case strings.Contains(err.Error(), "ssh: unable to authenticate"):
		return providers.KindUnauthorized, "auth"
	case errors.As(err, &cc):
		return providers.KindUnsupported, fsmeta.TypeName(cc.Type)
	case errors.As(err, &ee) && fsmeta.IsPermission(ee.Err):
		return providers.KindPermission, permCode(ee.Err)
	case errors.Is(err, os.ErrPermission):
		return providers.KindPermission, "SSH_FX_PERMISSION_DENIED"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.As(err, &dnsErr):
		return providers.KindUnavailable, "dial"
	case errors.As(err, &ne) && ne.Timeout():
		return providers.KindUnavailable, "timeout"
	case errors.Is(err, os.ErrNotExist):
		return providers.KindConflict, "SSH_FX_NO_SUCH_FILE"
	case errors.As(err, &st) && st.FxCode() == sftp.ErrSSHFxOpUnsupported:
		return providers.KindUnsupported, "SSH_FX_OP_UNSUPPORTED"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return providers.KindUnavailable, "connection lost"
	}
	return providers.KindUnavailable, ""
}

func wrap(op string, id providers.InstanceID, err error) error {
	return providers.Wrap(Name, op, id, err, classify)
}

func newErr(op string, id providers.InstanceID, k providers.Kind, format string, args ...any) error {
	return providers.Errorf(Name, op, id, k, format, args...)
}

// permCode is the code of an access refusal: the errno's name, or the
// SFTP status.
func permCode(err error) string {
	switch {
	case errors.Is(err, syscall.EACCES):
		return "EACCES"
	case errors.Is(err, syscall.EPERM):
		return "EPERM"
	}
	return "SSH_FX_PERMISSION_DENIED"
}
