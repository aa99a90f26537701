package snapshot

import (
	"context"
	"errors"
	"fmt"

	"lifeboat/blob"
	"lifeboat/repo"
)

// CheckSnapshots walks every snapshot and checks that every tree blob loads
// and decodes and every content chunk is in the index. damaged names packs
// a repository check found damaged or missing; files with a chunk in one of
// them are reported too, so a problem names the snapshots and file paths it
// affects. Each tree is walked once, under the first snapshot that holds it.
func CheckSnapshots(ctx context.Context, r *repo.Repository, damaged map[blob.ID]bool) (snapshots int, problems []repo.Problem, err error) {
	snaps, bad, err := List(ctx, r, "")
	if err != nil {
		return 0, nil, err
	}
	for id, e := range bad {
		problems = append(problems, repo.Problem{Kind: "snapshot_damaged", Object: "snapshots/" + id.String(), Detail: e.Error()})
	}
	seen := map[blob.ID]bool{}
	for _, m := range snaps {
		snapshots++
		where := "snapshot " + m.ID.Short()
		problem := func(kind, p, detail string) {
			problems = append(problems, repo.Problem{Kind: kind, Object: where + ":/" + p, Detail: detail})
		}
		var walk func(subtree []blob.ID, prefix string) error
		walk = func(subtree []blob.ID, prefix string) error {
			for _, id := range subtree {
				if seen[id] {
					return nil // the same directory was checked under an earlier snapshot
				}
				seen[id] = true
			}
			err := LoadDir(ctx, r, blob.Workspace, subtree, func(n *Node) error {
				p := prefix + string(n.Name)
				switch n.Type {
				case TypeDir:
					return walk(n.Subtree, p+"/")
				case TypeFile:
					for _, c := range n.Content {
						loc, ok, err := r.LookupBlob(blob.Workspace, blob.Data, c)
						switch {
						case err != nil:
							return err
						case !ok:
							problem("file_damaged", p, fmt.Sprintf("chunk %s is not in the index", c.Short()))
							return nil
						case damaged[loc.Pack]:
							problem("file_damaged", p, fmt.Sprintf("chunk %s is in damaged pack %s", c.Short(), loc.Pack.Short()))
							return nil
						}
					}
				}
				return nil
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				problem("tree_damaged", prefix, err.Error())
				return nil
			}
			return err
		}
		if err := walk(m.Root.Subtree, ""); err != nil {
			return snapshots, problems, err
		}
	}
	return snapshots, problems, nil
}
