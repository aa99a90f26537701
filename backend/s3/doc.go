// Package s3 stores repository files as objects in a bucket of an
// S3-compatible object store, through github.com/minio/minio-go/v7:
//
//	PREFIX/config
//	PREFIX/keys/<name>  PREFIX/index/<name>  PREFIX/snapshots/<name>  ...
//	PREFIX/data/<first two chars of name>/<name>
//
// the same layout as the local backend, so a bucket copied to a disk is a
// local repository and back.
//
// Invariants: every handle is checked with Handle.Valid before a key is
// built; a Save is one PUT (never multipart), so an object is either whole
// or absent; every PUT carries If-None-Match: * so no object is ever
// replaced: a 412 answer on a name that is the hash of its bytes means the
// same bytes are stored (an earlier try of the same PUT landed, or another
// writer stored the same blob) and counts as success, and a 412 on the
// config means "a repository already exists" unless the stored config has
// the same bytes; packs stream from an unlinked temp file, never whole in
// memory; a missing object's DELETE succeeds (S3 answers 204 either way);
// credentials never appear in errors or Location.
package s3
