package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lifeboat/blob"
	"lifeboat/prune"
	"lifeboat/repo"
)

// RetainOptions say how Retain treats one workspace after a capture.
type RetainOptions struct {
	Workspace string
	// LastGood is the checkpoint the caller just promoted: kept whatever
	// the policy says, even before a pin names it.
	LastGood blob.ID
	// Default is the policy of a workspace with no stored one; nil leaves
	// such a workspace alone.
	Default *prune.Policy
	Now     time.Time // default time.Now()
}

// Retain is the retention that runs after a capture: Forget for one
// workspace, with its stored policy (`lifeboat policy set`), else Default,
// else nothing is removed (the result then has the workspace in
// Unmanaged). Whatever the policy says it keeps the newest complete
// snapshot (the last good root), every snapshot a pin holds, and LastGood
// even if no pin names it yet. Snapshots already gone are listed in Gone,
// as for forget. Only snapshot objects are removed; prune frees their
// data. The caller holds a shared repository lock, as for the capture.
func Retain(ctx context.Context, r *repo.Repository, o RetainOptions) (ForgetResult, error) {
	if o.LastGood == (blob.ID{}) {
		return ForgetResult{}, fmt.Errorf("retention for %s: no last good checkpoint was named, so nothing was removed", o.Workspace)
	}
	res, err := Forget(ctx, r, ForgetOptions{Workspace: o.Workspace, Default: o.Default, Now: o.Now,
		Held: map[blob.ID]string{o.LastGood: HeldLastGood}})
	if errors.Is(err, ErrNoPolicy) {
		res.Unmanaged, res.Left = []string{o.Workspace}, map[string]int{}
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("retention for %s: %w", o.Workspace, err)
	}
	return res, nil
}
