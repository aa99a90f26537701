// Package checkpoint is "checkpoint a workspace", the one implementation
// the CLI (cmd/lifeboat) and the lifecycle (recovery) both call: capture
// with browser profiles (named or discovered) into the sensitive tier,
// verification of what was written, retention with the last-good rule
// (forget by policy), and prune over the repository's snapshots.
//
// Invariants:
//   - Retention and forget never remove the newest complete snapshot of a
//     workspace, a snapshot a pin holds, or one the caller names as held
//     (the last good checkpoint it just promoted); pins are read after the
//     snapshots, and again under the exclusive lock of the removals.
//   - A snapshot already gone when forget or retention comes to it is not
//     an error; it is reported (ForgetResult.Gone).
//   - A browser profile goes only into the sensitive tier: a key without
//     it is refused before anything is read (ErrProfileTier).
//   - Verify reads no file content: the manifest, every tree, and an index
//     lookup per chunk.
package checkpoint
