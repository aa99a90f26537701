// Package prune decides which snapshots to keep (retention policies) and
// removes what no kept snapshot needs (garbage collection).
//
// Invariants:
//   - The newest complete snapshot of every workspace, its last good root,
//     is kept whatever a policy says; a partial snapshot never counts as one.
//   - Prune writes new packs and index objects before it deletes anything,
//     and deletes old index objects before the packs they list. A
//     two-phase prune (Options.DeleteAfter, condemn.go) first condemns
//     what it finds unused, in a condemnation object captures respect, and
//     deletes only packs condemned a margin earlier that nothing stored
//     since needs, with no lock captures wait for; a one-phase prune
//     deletes at once under an exclusive lock. Both check for snapshots
//     that appeared while they planned. A prune killed at any point leaves
//     a repository that checks clean; running it again finishes the job.
//   - Memory stays bounded as the repository grows: the set of live blobs
//     is a sorted run of files on disk, merged against the bbolt index.
//
// prune does not import snapshot/ (docs/architecture.md): the caller
// passes a Source that lists snapshots and streams the blobs each one
// reaches (snapshot.PruneSource), through repo.Marker; a damaged snapshot
// is an error wrapping repo.ErrDamaged.
package prune
