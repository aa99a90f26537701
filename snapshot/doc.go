// Package snapshot holds what a checkpoint is made of, and how it is read:
// trees (one or more tree blobs per directory, listing its entries), the
// snapshot manifest that names a root tree, a snapshot's sensitive part,
// and what capture (snapshot/capture) and restore (snapshot/restore) both
// use: nodes, slash paths from a snapshot root, grafts, progress. Walking,
// listing, diffing, checking and exporting snapshots live here too.
//
// Invariants:
//   - Tree encoding is deterministic: the same directory gives the same
//     bytes and so the same blob id, and unchanged subtrees dedup.
//   - Names are raw bytes as the OS gave them, never re-encoded.
//   - What is read from storage is untrusted input: trees, manifests and
//     sensitive parts are decoded strictly, and every name is checked
//     (ValidName) before it is used.
//   - A snapshot's sensitive trees (browser profiles) are named by its
//     manifest only through the id of its sensitive part, a blob of the
//     sensitive tier.
package snapshot
