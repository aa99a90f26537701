// Package capture saves a directory tree as a snapshot (Run): it walks the
// tree by descriptor, reads and chunks its files in parallel, reuses the
// chunk ids of files unchanged since the last capture (FileCache), saves
// trees bottom-up and, last, the manifest. Browser profiles found in the
// tree go into the sensitive tier.
//
// Invariants:
//   - A manifest is saved only after every blob it references is durable
//     and indexed (repo.Flush returned nil): its existence is the promotion.
//   - Symlinks are never followed, and a file that changed while it was
//     read is never recorded as read cleanly: it is read again, kept as a
//     verified prefix, or listed in the manifest's errors.
//   - A snapshot's sensitive trees are saved only in the sensitive tier,
//     are absent from its workspace tree, and are named by the manifest
//     only through the id of its sensitive part.
//   - File cache entries are hints: a reused chunk list is used only when
//     every chunk is still indexed.
package capture
