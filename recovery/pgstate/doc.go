// Package pgstate keeps the recovery state store in PostgreSQL (pgx v5),
// so several `lifeboat serve` processes share workspaces, operations,
// repair holds, process restarts and events. It implements statedb.DB.
//
// Invariants:
//   - Every Update is one SERIALIZABLE transaction, retried as a whole on a
//     serialization failure or deadlock: the read-check-write of a
//     workspace (fencing by generation, one operation per workspace) holds
//     across servers as it does inside one bbolt file.
//   - The database itself refuses a second active operation of one
//     workspace (a partial unique index) and a second operation for one
//     idempotency key (a unique column).
//   - Operation leases carry an epoch that grows at every claim; a write
//     checks its epoch in its own transaction.
//   - The schema is versioned (lifeboat_schema); Open applies missing
//     migrations under an advisory lock and refuses a newer schema.
//   - The password never appears in errors or in Where.
package pgstate
