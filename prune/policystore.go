package prune

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// Objects stores sealed objects: repo.Repository satisfies it.
type Objects interface {
	SaveObject(ctx context.Context, kind crypt.ObjectKind, t blob.Tier, plaintext []byte) (blob.ID, error)
	LoadObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) (blob.Tier, []byte, error)
	ListObjects(ctx context.Context, kind crypt.ObjectKind, fn func(blob.ID) error) error
	RemoveObject(ctx context.Context, kind crypt.ObjectKind, id blob.ID) error
}

// StoredPolicy is a workspace's retention policy as kept in the repository
// (a sealed object of kind policy in the workspace tier, policies/<id>).
type StoredPolicy struct {
	Version   int       `json:"version"`
	Workspace string    `json:"workspace"`
	Set       time.Time `json:"set"` // when it was stored; the newest per workspace wins
	Policy

	ID blob.ID `json:"-"`
}

// SetPolicy stores p as workspace ws's policy, then removes the policies
// it replaces (so an interruption leaves old and new, and the newer wins).
func SetPolicy(ctx context.Context, o Objects, ws string, p Policy, now time.Time) (StoredPolicy, error) {
	if ws == "" {
		return StoredPolicy{}, errors.New("a stored policy needs a workspace")
	}
	if err := p.Validate(); err != nil {
		return StoredPolicy{}, err
	}
	old, _, err := listPolicies(ctx, o)
	if err != nil {
		return StoredPolicy{}, err
	}
	sp := StoredPolicy{Version: 1, Workspace: ws, Set: now.UTC(), Policy: p}
	b, err := json.Marshal(sp)
	if err != nil {
		return sp, err
	}
	if sp.ID, err = o.SaveObject(ctx, crypt.KindPolicy, blob.Workspace, b); err != nil {
		return sp, err
	}
	for _, q := range old {
		if q.Workspace == ws && q.ID != sp.ID {
			if err := o.RemoveObject(ctx, crypt.KindPolicy, q.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
				return sp, fmt.Errorf("new policy stored, but removing the old policies/%s failed: %w", q.ID, err)
			}
		}
	}
	return sp, nil
}

// RemovePolicy removes every stored policy of workspace ws.
func RemovePolicy(ctx context.Context, o Objects, ws string) (int, error) {
	all, _, err := listPolicies(ctx, o)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range all {
		if q.Workspace == ws {
			if err := o.RemoveObject(ctx, crypt.KindPolicy, q.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// Policies returns the current stored policy of each workspace, by
// workspace. A policy object that does not load is an error naming it:
// forget must not run with a policy it cannot read.
func Policies(ctx context.Context, o Objects) (map[string]StoredPolicy, error) {
	all, bad, err := listPolicies(ctx, o)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, errors.Join(bad...)
	}
	out := map[string]StoredPolicy{}
	for _, p := range all {
		cur, ok := out[p.Workspace]
		if !ok || p.Set.After(cur.Set) || (p.Set.Equal(cur.Set) && bytes.Compare(p.ID[:], cur.ID[:]) > 0) {
			out[p.Workspace] = p
		}
	}
	return out, nil
}

func listPolicies(ctx context.Context, o Objects) (all []StoredPolicy, bad []error, err error) {
	err = o.ListObjects(ctx, crypt.KindPolicy, func(id blob.ID) error {
		t, b, err := o.LoadObject(ctx, crypt.KindPolicy, id)
		if err == nil && t != blob.Workspace {
			err = fmt.Errorf("sealed in the %s tier, not workspace", t)
		}
		var p StoredPolicy
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			err = dec.Decode(&p)
			if rest := bytes.TrimSpace(b[dec.InputOffset():]); err == nil && len(rest) > 0 {
				err = fmt.Errorf("%d bytes after the policy's JSON object", len(rest))
			}
		}
		if err == nil {
			err = blob.CheckTime("its time set", p.Set)
		}
		if err == nil && (p.Version != 1 || p.Workspace == "") {
			err = fmt.Errorf("version %d, workspace %q", p.Version, p.Workspace)
		}
		if err == nil {
			err = p.Validate()
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			bad = append(bad, fmt.Errorf("policies/%s does not load: %w (delete that file and set the workspace's policy again with `lifeboat policy set`)", id, err))
			return nil
		}
		p.ID = id
		all = append(all, p)
		return nil
	})
	slices.SortFunc(all, func(a, b StoredPolicy) int { return cmp.Compare(a.Workspace, b.Workspace) })
	return all, bad, err
}
