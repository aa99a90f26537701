// Package dirlock serializes writes into a target directory (a restore into
// staging, the switch, a copy-back) per canonical target, across goroutines
// and processes, and holds the retry rules for a failed copy-back.
//
// Invariants:
//   - One target, one lock: a target is named by its canonical path
//     (Canonical: absolute, cleaned with the kernel's meaning of "..",
//     symlinks of existing parents resolved), so two spellings of one
//     target share a lock file.
//   - The lock is an flock(LOCK_EX|LOCK_NB) on
//     <state root>/locks/directory-merge/<hex SHA-256 of the canonical
//     path>.lock. The kernel releases it when the holder dies. The file is
//     created with O_CREAT and without O_TRUNC and is never unlinked or
//     replaced: its inode is the lock. Were it deleted and recreated, a
//     holder of the old inode and a newcomer on the new one would both
//     "hold" the lock.
//   - Within one process a table of held lock files excludes goroutines
//     before any file is opened, so exclusion does not depend on how the
//     filesystem implements flock (NFS emulates it with per-process POSIX
//     locks, which a second open in the same process would share).
//   - The owner sidecar (<hash>.owner) is diagnostics only: it names the
//     holder in a BusyError and is never read to decide who holds a lock.
//   - Waiting never blocks: attempts are non-blocking and the pauses
//     between them come from an injected Clock, so a caller's context
//     cancels a wait at once and independent targets proceed in parallel.
//   - A copy-back is retried only when it failed before writing any file
//     (CopyBack, RetryPolicy).
package dirlock
