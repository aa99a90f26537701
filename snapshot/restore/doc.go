// Package restore rebuilds a snapshot into a directory (Run): it plans the
// tree, reads each pack range once, checks every chunk against its id and
// writes the checked bytes at their offsets into a staging directory
// beside the target, checks every file's size, syncs, and switches the
// staged tree into place. Grafts (a snapshot's
// browser profiles) are restored into the same staging tree.
//
// Invariants:
//   - A manifest and its trees are untrusted input: the whole tree is
//     walked and every entry checked (names, node fields, hard link
//     targets, extended attributes, declared totals) before anything is
//     written; a refused entry is an *Error wrapping
//     snapshot.ErrUnsafeEntry.
//   - Restore writes only inside its staging directory, through
//     descriptors that never follow a symlink, and refuses a target that
//     holds or lies inside the repository or a protected directory.
//   - On any error or cancellation the target is left exactly as it was;
//     the tree it replaced is kept until the switch holds.
package restore
