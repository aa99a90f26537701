// Package platformtest is the contract-server scaffolding the HTTP sandbox
// adapters (vercel, daytona, cloudflare) are tested against: a set of fake
// sandboxes whose filesystems are directories on this host, and one
// http.Handler per platform serving that platform's documented routes,
// status codes and bodies over them (each handler names its reference).
//
// A sandbox's directory stands for its filesystem root: a path the API
// names ("/vercel/sandbox/x") is that path under the directory, and a
// command runs on this host with the mapped working directory, so only
// commands that use relative paths (as the adapters' do) see the sandbox.
// Faults (a status, a Retry-After, a hang) are injected per request with
// SetFault; the faults (Status, Hang) serve the e2b and managed-agents
// contract servers' SetFault too. Nothing here is for production use.
package platformtest
