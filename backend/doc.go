// Package backend is where repository files live: a small Backend interface
// whose doc comment is the contract (atomic, durable saves; a config
// created once; exact range loads; sentinel errors), a local filesystem
// implementation (backend/local), S3-compatible object storage
// (backend/s3), the one place a location string becomes a backend
// (backend/location), a fault-injecting wrapper for tests, and a
// conformance suite (backend/backendtest) that every implementation must
// pass.
//
// Invariants: a backend never imports repository code and never sees
// plaintext; an interrupted Save leaves nothing visible.
package backend
