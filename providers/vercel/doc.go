// Package vercel is the Provider for Vercel Sandbox, over its REST API as
// the official SDK calls it (reference: vercel/sandbox,
// packages/vercel-sandbox/src/api-client/api-client.ts and validators.ts;
// errors: vercel.com/docs/errors/SANDBOX_STOPPED). Every request carries
// the access token (Authorization: Bearer) and ?teamId=; sandboxes are
// created in Config.ProjectID.
//
// Control plane: Inspect is GET /v1/sandboxes/{id} (404 is the only
// Missing besides a status that means the sandbox and its filesystem are
// gone: stopped, stopping, failed, aborted); Create is POST /v1/sandboxes;
// Destroy is POST /v1/sandboxes/{id}/stop (Vercel has no delete; a stopped
// sandbox's filesystem is gone). There is no Stopper and no Pause: a stop
// cannot be undone.
//
// Files and Exec go through boxfiles over POST /v1/sandboxes/{id}/cmd
// (wait=true, ndjson) with GET .../cmd/{cmdId}/logs for stdout and stderr,
// POST .../fs/write (a gzipped tar) and POST .../fs/read.
//
// Native checkpoints are not offered: a Vercel snapshot (POST
// /v1/sandboxes/{id}/snapshot) stops the sandbox it captures, so it cannot
// be taken before a portable capture of a running workspace.
//
// Vercel has no idempotency key and no labels on sandboxes: Create records
// key -> sandbox id in CacheDir/keys, so a retried Create (also after a
// restart) finds the sandbox the first one made; a crash between the
// platform's answer and that record leaves an unrecorded sandbox behind.
//
// Tested only against the contract server in providers/platformtest,
// never against the live service.
package vercel
