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
package recovery
