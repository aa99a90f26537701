package checkpoint

import (
	"context"
	"fmt"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Verify is the check a snapshot passes before it is promoted: its
// manifest loads back and decodes, every tree blob it reaches loads and
// decodes, and every chunk of every file is in the repository index. With
// a key that has the sensitive tier, its sensitive part is checked the
// same way. It reads no file content (the repository verified every blob
// when it was sealed, and the index lists only durable packs), so it costs
// one index lookup per chunk and one read per distinct tree blob.
func Verify(ctx context.Context, r *repo.Repository, id blob.ID) error {
	m, err := snapshot.LoadManifest(ctx, r, id)
	if err != nil {
		return err
	}
	v := verifier{ctx: ctx, r: r, seen: map[string]bool{}}
	if err := v.dir(blob.Workspace, m.Root.Subtree, ""); err != nil {
		return fmt.Errorf("verifying snapshot %s: %w", id.Short(), err)
	}
	if m.Sensitive == nil || !hasTier(r, blob.Sensitive) {
		return nil
	}
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		return fmt.Errorf("verifying snapshot %s: %w", id.Short(), err)
	}
	for _, t := range part.Trees {
		if err := v.dir(blob.Sensitive, t.Root.Subtree, t.Path); err != nil {
			return fmt.Errorf("verifying snapshot %s: %w", id.Short(), err)
		}
	}
	return nil
}

type verifier struct {
	ctx  context.Context
	r    *repo.Repository
	seen map[string]bool // directories checked, by tier and tree blob ids
}

func (v *verifier) dir(tier blob.Tier, subtree []blob.ID, path string) error {
	key := []byte{byte(tier)}
	for _, id := range subtree {
		key = append(key, id[:]...)
	}
	if v.seen[string(key)] {
		return nil
	}
	v.seen[string(key)] = true
	return snapshot.LoadDir(v.ctx, v.r, tier, subtree, func(n *snapshot.Node) error {
		p := path + "/" + string(n.Name)
		switch n.Type {
		case snapshot.TypeDir:
			return v.dir(tier, n.Subtree, p)
		case snapshot.TypeFile:
			for _, c := range n.Content {
				_, ok, err := v.r.LookupBlob(tier, blob.Data, c)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("%q: chunk %s is not in the index", p, c.Short())
				}
			}
		}
		return nil
	})
}
