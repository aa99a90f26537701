// Package server is the HTTP JSON API of `lifeboat serve` over one seam to
// package recovery (RecoveryService: the checkpoint lifecycle and the
// recovery state machine): workspaces, checkpoints, park, recovery state and
// offer, approval, process restarts, repair holds, and a server-sent-events
// stream of state changes, plus a built-in status page.
//
// Invariants:
//   - No token, no access: every /v1 route needs a bearer token from the
//     token file; operator-only routes refuse a user token. Tokens are
//     compared as SHA-256 hashes in constant time and never logged.
//   - One state for every client: every change is published once, with one
//     sequence number, to every connected event stream in the same order.
//     Event ids are "EPOCH-SEQ", the epoch random per process (Events): a
//     client reconnecting with an id of an earlier process, or one no
//     longer kept, gets a "resync" event first, never a silent gap.
//   - Every error is JSON {"code": stable code, "message": for people}.
//   - Approvals and process restarts carry an idempotency key; the server
//     passes it through and never retries them on its own.
//   - No connection is held for ever (Timeouts, HTTPServer): headers
//     within the read timeout (at most 10 s), a body within the read
//     timeout of the headers (else 408 request_timeout and the connection
//     closed), an answer within the write timeout from its first byte (the
//     event stream per event, and no read deadline), a keep-alive
//     connection closed after the idle timeout.
//   - A JSON body is one object of at most 64 KiB with only white space
//     after it; unknown fields are refused. Every answer carries
//     X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.
//   - Every request is logged (method, path, status, role, token label,
//     duration; never headers or tokens), and every state-changing one
//     (POST, PUT, PATCH, DELETE) again as an "audit" line at info level:
//     role, token label, method, path, workspace, idempotency key, status
//     and error code.
package server
