// Package backend is where repository files live: a small Backend interface
// whose doc comment is the contract (atomic, durable saves; exact range
// loads; sentinel errors), a local filesystem implementation, a
// fault-injecting wrapper for tests, and a conformance suite
// (backend/backendtest) that every implementation must pass.
//
// Invariants: a backend never imports repository code and never sees
// plaintext; an interrupted Save leaves nothing visible.
package backend
