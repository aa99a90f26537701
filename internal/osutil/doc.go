// Package osutil holds the few operating-system helpers several layers
// need, written once: retrying a system call a signal interrupted
// (IgnoringEINTR), flock on a descriptor or file (Flock, FlockFile), and
// whether a process exists on this host (ProcessAlive), whether a range
// of a file is a hole (IsHole), and reading a file's extended attributes
// while they change (ReadXattrs); a wait that ends early when its context
// does (Sleep); and a Unix mode's permission, setuid, setgid and sticky
// bits to and from fs.FileMode's (UnixMode, FileMode).
//
// It imports nothing of the module, so any package may use it.
package osutil
