// Package statedb is the storage under the recovery state store: records
// of a few kinds (workspaces, operations, repair holds, process restarts,
// pending native deletes, checkpoint histories), each a JSON body with the
// few fields a database indexes, read and written in transactions.
//
// Two implementations keep the same contract: Bolt, one embedded bbolt
// file that one process holds (the default for one server), and the
// PostgreSQL one in recovery/pgstate, shared by many servers.
//
// Invariants:
//   - Update runs its function in one serializable transaction: either all
//     of its writes land or none. A shared database may run the function
//     again after a conflict with another server, so it must only read
//     from the transaction and set (never accumulate) outside state.
//   - At most one active operation per workspace, and one operation per
//     approval idempotency key: Put refuses a second one (ErrConflict).
//   - A lease has one holder at a time; every claim gives a higher epoch,
//     and Tx.CheckLease fails for an older one in the writing transaction.
package statedb
