// Package daytona is the Provider for Daytona sandboxes, over Daytona's
// REST API (reference: daytonaio/daytona apps/api/src/sandbox/controllers/
// sandbox.controller.ts for the sandbox routes and
// toolbox.deprecated.controller.ts for the toolbox reached through the
// API; errors: daytona.io/docs python-sdk shared errors). Requests carry
// the API key (Authorization: Bearer) and, when configured,
// X-Daytona-Organization-ID.
//
// Control plane: Inspect is GET /sandbox/{id}: 404 and 410 and the states
// destroyed and destroying are Missing; started is Running; stopped and
// archived are Stopped (their files survive); a state in transition is a
// conflict to retry. Create is POST /sandbox with the idempotency key as a
// label, after GET /sandbox?labels= found none; Destroy is DELETE
// /sandbox/{id}; Stop (providers.Stopper) labels the sandbox with when
// Lifeboat stopped it, then POST /sandbox/{id}/stop.
//
// Files and Exec go through boxfiles over the toolbox: POST
// /toolbox/{id}/toolbox/process/execute (one command line, single-quoted
// words; its "result" is stdout, stderr goes to a file read back), GET
// .../files/download and POST .../files/upload. A stopped sandbox's
// toolbox answers 400 "Is the Sandbox started?": a conflict, never
// Missing.
//
// Native checkpoints are not offered: Daytona's snapshots are templates,
// and its memory-and-disk checkpoints restore only on the runner that
// took them; this adapter uses none of them.
//
// Tested only against the contract server in providers/platformtest,
// never against the live service.
package daytona
