// Package snapshot holds what a checkpoint is made of: trees (one or more
// tree blobs per directory, listing its entries) and the snapshot manifest
// that names a root tree, plus the capture and restore pipelines built on
// them.
//
// Invariants:
//   - Tree encoding is deterministic: the same directory gives the same
//     bytes and so the same blob id, and unchanged subtrees dedup.
//   - Names are raw bytes as the OS gave them, never re-encoded.
//   - A manifest is saved only after every blob it references is durable
//     and indexed (repo.Flush returned nil): its existence is the promotion.
//   - At restore time a manifest and its trees are untrusted input: every
//     name is validated before use (ValidName).
//   - A snapshot's sensitive trees (browser profiles) are saved only in the
//     sensitive tier, are absent from its workspace tree, and are named by
//     the manifest only through the id of its sensitive part.
package snapshot
