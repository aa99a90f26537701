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
//
// Invariants: instance ids are single names (letters, digits, '.', '_', '-',
// not starting with '.'), so nothing outside the root can be named; every
// write goes through an os.Root opened on the root, so a symlink inside a
// workspace can never redirect a write out of it; staging and checkpoint
// trees live on the root's filesystem, so switches are renames. A missing
// instance directory under a present root is Missing; a root that cannot be
// opened is KindUnavailable, never Missing.
package local
