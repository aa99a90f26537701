// Package cloudflare is the Provider for Cloudflare Sandbox SDK sandboxes
// (Containers behind Durable Objects), reached through a small Worker, the
// bridge, that exposes the SDK over HTTP. docs/providers.md defines the
// bridge's routes, each after the SDK call it makes (reference:
// developers.cloudflare.com/sandbox, the SDK's getSandbox, exec,
// writeFile, readFile, destroy, createBackup and restoreBackup):
//
//	PUT    /v1/sandboxes/{id}                            create if absent: 201 or 200 {"id","state"}
//	GET    /v1/sandboxes/{id}                            {"id","state"}: running | lost; 404 SANDBOX_NOT_FOUND
//	DELETE /v1/sandboxes/{id}                            204; 404
//	POST   /v1/sandboxes/{id}/exec                       {"argv","cwd"} -> {"exitCode","stdout","stderr"}
//	PUT    /v1/sandboxes/{id}/files?path=ABS             raw body -> 204
//	GET    /v1/sandboxes/{id}/files?path=ABS             raw body; 404 FILE_NOT_FOUND
//	POST   /v1/sandboxes/{id}/backups                    {"dir"} -> 201 {"id","dir"}
//	POST   /v1/sandboxes/{id}/backups/{backup}/restore   200 {"id","dir"}; 404 BACKUP_NOT_FOUND
//	DELETE /v1/backups/{backup}                          204; 404
//
// A sandbox name always resolves to a Durable Object, so "not found" is
// the bridge's own record: 404 when the bridge never created the sandbox
// or destroyed it. A container that restarted lost its disk ("stopping
// the instance deletes the files on its disk"): the bridge reports state
// lost, which Inspect reads as Missing, and refuses its data plane (409
// CONTAINER_DISK_LOST) until a backup is restored into it.
//
// Create names the sandbox after the idempotency key (providers.KeyedName),
// so a retried Create finds it by name. Native checkpoints are directory
// backups of the workspace (createBackup; R2 behind the SDK, kept for the
// SDK's TTL): Rollback restores one into the same sandbox, also one whose
// container lost its disk. There is no Pause and no Stopper.
//
// Tested only against the contract server in providers/platformtest,
// never against a live Worker.
package cloudflare
