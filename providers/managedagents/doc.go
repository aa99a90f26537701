// Package managedagents is the Provider for agent sessions on a Managed
// Agents sessions API with checkpoints: DigitalOcean's Harness Runtime
// ("Managed Agents Runtime Services"), whose public API reference is
// https://docs.digitalocean.com/reference/api/ (routes under
// /v2/agents/sessions; the pydo and DoTs references mirror it). Only these
// routes are used:
//
//	GET    /v2/agents/sessions/{session_id}                                  Inspect
//	POST   /v2/agents/sessions/{session_id}/checkpoints  {"label"}           Checkpoint (synchronous: READY or an error)
//	DELETE /v2/agents/sessions/{session_id}/checkpoints/{checkpoint_id}      DeleteCheckpoint (idempotent)
//	POST   /v2/agents/sessions/{session_id}/checkpoints/{checkpoint_id}/rollback   Rollback (boots a fresh sandbox, returns the session with its new sandbox_id)
//	POST   /v2/agents/sessions/{session_id}/pause | /resume                  Pause, Resume (501 on substrates without it)
//
// An instance id is "<session_id>/<sandbox_id>" (or a bare session id,
// when a workspace is registered before its sandbox is known); a rollback
// returns the id with the new sandbox, which the lifecycle records. A
// checkpoint id is "<session_id>/<checkpoint_id>", since deleting one
// needs its session.
//
// The platform's checkpoints hold the session's machine state; the API
// offers no file transfer or command execution this adapter could use, so
// Files, Exec and Create are unsupported: Lifeboat protects such a
// workspace only through the platform's own checkpoints (park takes one,
// restart rolls back to the newest), and cannot recover it into a new
// session when it is lost. Tested only against a local contract server
// (matest) built from the reference above, never against the live service.
package managedagents
