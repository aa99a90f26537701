// Package local is the Provider for workspaces that are directories on
// this machine: every instance is one directory directly under a root.
//
// Layout under the root:
//
//	<root>/<instance>/              one workspace per instance
//	<root>/.lifeboat/staging/       WriteFiles staging trees and Create/Rollback builds
//	<root>/.lifeboat/checkpoints/   native checkpoints (reflink or plain copies)
//	<root>/.lifeboat/trash/         trees being removed after Destroy or Switch
//	<root>/.lifeboat/switching/     an old tree during a non-atomic Switch fallback
//	<root>/.lifeboat/stopped/<id>   the marker Stop leaves (when Lifeboat stopped the instance)
//	<root>/.lifeboat/probe.<random> a scratch directory while FileSupport probes the filesystem
//
// Copies (WriteFiles, Create from a template, Checkpoint, Rollback) keep
// hard links, xattrs, fifos, holes, setuid/setgid/sticky modes, times and,
// as root, owners; sockets and devices are refused by name before
// anything is written (see copyTree and FileSupport).
//
// Invariants: instance ids are single names (letters, digits, '.', '_', '-',
// not starting with '.'), so nothing outside the root can be named; every
// write goes through an os.Root opened on the root, so a symlink inside a
// workspace can never redirect a write out of it; staging and checkpoint
// trees live on the root's filesystem, so switches are renames. A missing
// instance directory under a present root is Missing; a root that cannot be
// opened is KindUnavailable, never Missing.
package local
