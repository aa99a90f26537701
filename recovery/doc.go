// Package recovery is the checkpoint lifecycle the host server drives:
// when captures happen (on park, periodically, on demand), how writers are
// quiesced around them, what is promoted and recorded, and provider-native
// checkpoints with rollback.
//
// Invariants:
//   - A workspace's last good checkpoint moves only after its snapshot was
//     written and verified (manifest loaded back, every tree readable and
//     every chunk indexed) and the snapshot is complete; a failed,
//     partial, cancelled or interrupted capture never replaces it.
//   - Writers paused for a capture are resumed whatever happens to it:
//     failure, cancellation or panic.
//   - One capture at a time per workspace: concurrent requests join the
//     one in flight and get its receipt. Restart waits for it.
//   - A capture failure never breaks the park throttle: the throttle is
//     measured from the last successful capture.
//   - All state lives in one bbolt file (Store), written in single
//     transactions, so a crash at any point leaves the previous record.
//
// Recovery (Service, docs/recovery.md):
//   - Only a provider's confirmed Missing makes a workspace lost; an
//     outage, an auth failure, a rate limit or any other error records a
//     health state and never creates, destroys or replaces anything.
//   - Nothing is created before an approval that names the offered
//     checkpoint, and the old instance is inspected again (still Missing)
//     right before Create. One idempotency key, one operation.
//   - An operation's intent is stored before each external call, and each
//     call is safe to repeat, so a restart resumes it (Resume); Create is
//     keyed, so an interrupted create is found again, never doubled.
//   - The workspace id never changes; its instance and generation change
//     together, in the transaction that ends the operation. Captures and
//     requests for an older instance or generation are refused.
//   - A failed copy-back keeps the replacement and the source and records
//     a repair hold in the same transaction; only an operator clears it.
package recovery
