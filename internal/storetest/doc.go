// Package storetest runs a test against every kind of repository storage:
// a local directory and a bucket on a real S3 server (versitygw, through
// internal/s3test). Tests that take a backend call Each, so one test body
// is the matrix, not one copy per backend.
package storetest
