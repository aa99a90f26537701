// Package ssh is the Provider for workspaces that are directories on a host
// reached over SSH (golang.org/x/crypto/ssh + github.com/pkg/sftp).
//
// Layout on the host, under Config.Root (like the local adapter's):
//
//	<root>/<instance>/              one workspace per instance
//	<root>/.lifeboat/staging/       WriteFiles uploads
//	<root>/.lifeboat/switching/     the old tree during a Switch
//	<root>/.lifeboat/trash/         trees being removed by Destroy
//	<root>/.lifeboat/probe.XXXXXXXX a scratch directory while FileSupport probes the host (removed at once)
//
// File fidelity depends on the host's tools, probed once per Provider (see
// FileSupport): GNU tar for writing hard links, fifos, xattrs, owners and
// nanosecond mtimes (WriteFiles streams a tar into it; SFTP file by file
// without it), GNU find for mirroring hard links and nanosecond mtimes
// (whole seconds without it) and getfattr for xattrs on ReadFiles. Holes
// are never kept.
//
// There is no Stop (providers.Stopper): a directory on a host has nothing
// running of its own to stop, and the processes an agent started there are
// not the adapter's to manage.
//
// Invariants: the host key is always checked (a known_hosts file or a
// pinned key; there is no way to turn checking off); instance ids are plain
// names (providers.ValidName); remote symlinks are mirrored as symlinks and
// never followed; the local mirror is written through an os.Root, so
// nothing a remote host sends can write outside the cache directory, and
// only user.* xattrs are set there. Each call dials its own connection, so
// a stopped sshd is seen at once as KindUnavailable rather than hidden
// behind a connection opened earlier.
package ssh
