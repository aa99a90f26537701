// Package server is the HTTP JSON API of `lifeboat serve` over the
// checkpoint lifecycle (recovery.Lifecycle) and the recovery state machine
// (RecoveryService): workspaces, checkpoints, park, recovery state and
// offer, approval, process restarts, repair holds, and a server-sent-events
// stream of state changes, plus a built-in status page.
//
// Invariants:
//   - No token, no access: every /v1 route needs a bearer token from the
//     token file; operator-only routes refuse a user token. Tokens are
//     compared as SHA-256 hashes in constant time and never logged.
//   - One state for every client: every change is published once, with one
//     sequence number, to every connected event stream in the same order.
//   - Every error is JSON {"code": stable code, "message": for people}.
//   - Approvals and process restarts carry an idempotency key; the server
//     passes it through and never retries them on its own.
package server
