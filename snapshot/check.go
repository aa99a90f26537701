package snapshot

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"lifeboat/blob"
	"lifeboat/repo"
)

// dirProblem is damage found under a directory, at a path relative to it.
type dirProblem struct{ kind, rel, detail string }

// CheckSnapshots walks every snapshot and checks that every tree blob loads
// and decodes and every content chunk is in the index. damaged names packs
// a repository check found damaged or missing; files with a chunk in one of
// them are reported too. Every problem names the snapshot and the path it
// affects, for every snapshot that reaches it. Each directory is read once
// (keyed by its tree blob ids); what was found under it is remembered and
// reported again, with the right path, for every snapshot that shares it.
// The trees of directories not read yet are loaded ahead (TreesAhead).
func CheckSnapshots(ctx context.Context, r *repo.Repository, damaged map[blob.ID]bool) (snapshots int, problems []repo.Problem, err error) {
	snaps, bad, err := List(ctx, r, "")
	if err != nil {
		return 0, nil, err
	}
	// A capture saves its index objects before its manifest: syncing after
	// the listing finds the blobs of every snapshot listed, including one
	// that finished since the caller last synced.
	if _, err := r.SyncIndex(ctx); err != nil {
		return 0, nil, err
	}
	for id, e := range bad {
		problems = append(problems, repo.Problem{Kind: "snapshot_damaged", Object: "snapshots/" + id.String(), Detail: e.Error()})
	}
	// memo is read by the loaders ahead too (want), so it is locked.
	var memoMu sync.Mutex
	memo := map[string][]dirProblem{}
	var checkDir func(ahead *TreesAhead, tier blob.Tier, subtree []blob.ID) ([]dirProblem, error)
	checkDir = func(ahead *TreesAhead, tier blob.Tier, subtree []blob.ID) ([]dirProblem, error) {
		key := dirKey(tier, subtree)
		memoMu.Lock()
		found, ok := memo[key]
		memoMu.Unlock()
		if ok {
			ahead.Forget(subtree)
			return found, nil
		}
		err := ahead.LoadDir(ctx, subtree, func(n *Node) error {
			name := string(n.Name)
			switch n.Type {
			case TypeDir:
				sub, err := checkDir(ahead, tier, n.Subtree)
				for _, p := range sub {
					found = append(found, dirProblem{p.kind, name + "/" + p.rel, p.detail})
				}
				return err
			case TypeFile:
				for _, c := range n.Content {
					loc, ok, err := r.LookupBlob(tier, blob.Data, c)
					switch {
					case err != nil:
						return err
					case !ok:
						found = append(found, dirProblem{"file_damaged", name, fmt.Sprintf("chunk %s is not in the index", c.Short())})
						return nil
					case damaged[loc.Pack]:
						found = append(found, dirProblem{"file_damaged", name, fmt.Sprintf("chunk %s is in damaged pack %s", c.Short(), loc.Pack.Short())})
						return nil
					}
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			found = append(found, dirProblem{"tree_damaged", "", err.Error()})
		}
		memoMu.Lock()
		memo[key] = found
		memoMu.Unlock()
		return found, nil
	}
	// check checks the directories of tier whose tree blobs are roots, one
	// at a time, with a TreesAhead that leaves out the directories of one
	// blob already read.
	check := func(tier blob.Tier, roots [][]blob.ID, report func(i int, found []dirProblem)) error {
		ahead := NewTreesAhead(ctx, r, tier, WalkAheadBounds, func(id blob.ID) bool {
			memoMu.Lock()
			defer memoMu.Unlock()
			_, read := memo[dirKey(tier, []blob.ID{id})]
			return !read
		})
		defer ahead.Stop()
		for i, subtree := range roots {
			found, err := checkDir(ahead, tier, subtree)
			if err != nil {
				return err
			}
			report(i, found)
		}
		return nil
	}
	sensitive := slices.Contains(r.Tiers(), blob.Sensitive)
	for _, m := range snaps {
		snapshots++
		err := check(blob.Workspace, [][]blob.ID{m.Root.Subtree}, func(_ int, found []dirProblem) {
			for _, p := range found {
				problems = append(problems, repo.Problem{Kind: p.kind, Object: "snapshot " + m.ID.Short() + ":/" + p.rel, Detail: p.detail})
			}
		})
		if err != nil {
			return snapshots, problems, err
		}
		if m.Sensitive == nil || !sensitive {
			continue // a key without the sensitive tier checks what it can read
		}
		part, err := LoadSensitivePart(ctx, r, m)
		if err != nil {
			if ctx.Err() != nil {
				return snapshots, problems, ctx.Err()
			}
			problems = append(problems, repo.Problem{Kind: "sensitive_damaged", Object: "snapshot " + m.ID.Short(), Detail: err.Error()})
			continue
		}
		roots := make([][]blob.ID, len(part.Trees))
		for i, t := range part.Trees {
			roots[i] = t.Root.Subtree
		}
		err = check(blob.Sensitive, roots, func(i int, found []dirProblem) {
			for _, p := range found {
				problems = append(problems, repo.Problem{Kind: p.kind, Object: "snapshot " + m.ID.Short() + ":/" + JoinPath(part.Trees[i].Path, p.rel), Detail: p.detail})
			}
		})
		if err != nil {
			return snapshots, problems, err
		}
	}
	return snapshots, problems, nil
}
