package recovery

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"lifeboat/backend"
)

// outageRestorer fails its first fails restores the way a repository on an
// unreachable S3 server does (backend.ErrUnavailable after the retries).
type outageRestorer struct {
	Restorer
	fails int
}

func (r *outageRestorer) Restore(ctx context.Context, id, dir string) (RestoreInfo, error) {
	if r.fails > 0 {
		r.fails--
		return RestoreInfo{}, fmt.Errorf("loading data/6f/6fb3: %w", backend.ErrUnavailable)
	}
	return r.Restorer.Restore(ctx, id, dir)
}

// A recovery whose restore meets a storage outage waits at its step, like a
// provider outage, and finishes once the storage answers again: the
// operation does not fail for good.
func TestRestoreStorageOutageWaits(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		e.restorer = &outageRestorer{Restorer: e.restorer, fails: 1}
		e.reopen()
		op := e.approve(cp.Snapshot, "storage-outage")
		if op = e.wait(op.ID); op.State != OpRestoring || !strings.Contains(op.LastError, backend.ErrUnavailable.Error()) || op.RetryAt.IsZero() {
			t.Fatalf("after a storage outage: %+v", op)
		}
		e.clock.Advance(op.RetryAt.Sub(e.clock.Now()))
		e.svc.CheckDue(e.ctx)
		if op = e.wait(op.ID); op.State != OpRecovered || op.LastError != "" {
			t.Fatalf("after the storage came back: %+v", op)
		}
	})
}
