// Package location turns a repository location into a backend.Backend:
// a path is a local directory (backend/local), s3:http[s]://HOST/BUCKET
// [/PREFIX] a bucket on S3-compatible storage (backend/s3). Every command
// and the server open repositories through it, so a location means the
// same everywhere.
//
// Invariants: it writes nothing when opening; S3 credentials come from
// Options (the config file) or the standard AWS_* environment variables
// and never appear in a location, a message or an error.
package location
