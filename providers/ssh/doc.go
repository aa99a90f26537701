// Package ssh is the Provider for workspaces that are directories on a host
// reached over SSH (golang.org/x/crypto/ssh + github.com/pkg/sftp).
//
// Layout on the host, under Config.Root (like the local adapter's):
//
//	<root>/<instance>/              one workspace per instance
//	<root>/.lifeboat/staging/       WriteFiles uploads
//	<root>/.lifeboat/switching/     the old tree during a Switch
//	<root>/.lifeboat/trash/         trees being removed by Destroy
//
// Invariants: the host key is always checked (a known_hosts file or a
// pinned key; there is no way to turn checking off); instance ids are plain
// names (providers.ValidName); remote symlinks are mirrored as symlinks and
// never followed; the local mirror is written through an os.Root, so
// nothing a remote host sends can write outside the cache directory. Each
// call dials its own connection, so a stopped sshd is seen at once as
// KindUnavailable rather than hidden behind a connection opened earlier.
package ssh
