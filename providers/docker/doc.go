// Package docker is the Provider for workspaces that are Docker containers,
// driven through the Docker Engine API (github.com/moby/moby/client, which
// negotiates the API version with the daemon: 1.41 with Debian's docker.io
// 20.10, anything from 1.40 up).
//
// An instance is a container; its workspace is one directory inside it
// (Config.Workdir, "/workspace" by default) in the container's own
// filesystem, so a commit carries it. Lifeboat's own state in a container
// lives under /.lifeboat: staging/ for WriteFiles, switching/ for the old
// tree during a Switch.
//
//   - Control plane: Inspect (a 404 "No such container" is the only
//     Missing; a daemon that does not answer is KindUnavailable, 401/403
//     KindUnauthorized), Create from an image with the configured mounts,
//     labels and command (named after the idempotency key, so a retried
//     Create finds the first one), Destroy, Stop.
//   - Pause and Resume (the cgroup freezer) around a capture.
//   - Files through the archive endpoints (tar streams): ReadFiles
//     extracts the workspace into a local mirror, WriteFiles uploads a
//     tree into a staging directory in the container and Switch puts it in
//     place with `mv` run through exec (the image needs a shell and mv).
//     Tar carries modes with setuid, setgid and sticky, whole-second
//     mtimes, hard links, symlinks, fifos and owners; the daemon's archive
//     reader does not carry user.* xattrs, and holes are written as zeros.
//   - Exec through the exec API (stdout and stderr demultiplexed, exit
//     code from exec inspect).
//   - Native checkpoints: a commit of the container to an image tagged
//     <checkpoint repository>:<container>-<random> and labelled
//     lifeboat.checkpoint; Rollback creates a new container from that image
//     with the same mounts and labels, and the old container is removed
//     (stopped when Lifeboat did not create it).
//
// Invariants: Rollback removes the container it replaces only when it
// carries lifeboat.managed=true (it stops any other); Destroy removes an
// image only when it is an untagged checkpoint image; instance ids are
// container ids or names (providers.ValidName); the local mirror is
// written through an os.Root, so nothing a daemon sends can write outside
// the cache directory.
package docker
