// Package tartree moves a directory tree through a tar stream, for the
// adapters whose platform takes and gives files as tar archives (an SSH
// host's GNU tar, a sandbox's tar run through its process API): Write
// turns a local tree into a PAX stream that keeps permission bits
// (setuid, setgid, sticky too), nanosecond mtimes, numeric owners, hard
// links, symlinks, fifos and optionally user.* xattrs; Extract writes such
// a stream into a local directory.
//
// Invariants: Extract writes only through an os.Root, so no entry can
// reach outside its directory (an absolute name, "..", a hard link or a
// path through a symlink that would leave it are refused with an error
// naming the entry); it never creates devices or sockets nor sparse
// entries (whose expanded size the stream does not bound), never writes
// through a symlink as a file's last component, and sets directory modes
// and mtimes after their children, so read-only directories extract.
package tartree
