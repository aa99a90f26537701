package recovery

import (
	"context"
	"time"

	"lifeboat/prune"
	"lifeboat/repo"
)

// RepoPolicies stores workspaces' retention policies in the repository
// (`lifeboat policy set` does the same), each change under a shared lock.
type RepoPolicies struct {
	Repo *repo.Repository
	Lock repo.LockOptions
}

// SetPolicy stores p as the policy of ws, or removes its stored policy
// when p is nil (the default policy then applies).
func (rp RepoPolicies) SetPolicy(ctx context.Context, ws string, p *prune.Policy) error {
	return rp.Repo.Locked(ctx, repo.LockShared, rp.Lock, func(*repo.Lock) error {
		if p == nil {
			_, err := prune.RemovePolicy(ctx, rp.Repo, ws)
			return err
		}
		_, err := prune.SetPolicy(ctx, rp.Repo, ws, *p, time.Now())
		return err
	})
}
