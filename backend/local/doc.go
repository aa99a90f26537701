// Package local stores repository files in a directory tree:
//
//	config
//	keys/<name>  index/<name>  snapshots/<name>  locks/<name>
//	data/<first two chars of name>/<name>
//	tmp/         (in-flight and abandoned saves)
//
// Invariants: every handle is checked with Handle.Valid before any path is
// built, so no name escapes the directory; a Save writes a temp file in
// tmp/, fsyncs it, renames it into place and fsyncs the directory, so a
// file under a handle name is always complete; the repository root is
// never created implicitly after Create (an unmounted disk fails loudly
// instead of filling the mount point); Open never writes, so read-only
// media can be restored from. Files are 0600, directories 0700.
package local
