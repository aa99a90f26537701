// Package boxfiles gives the HTTP sandbox adapters (vercel, daytona,
// cloudflare) their file access and Exec over the three things every such
// platform offers: upload a file, download a file, run a command and get
// its exit code and output (Box). Trees move as tar archives made and
// unpacked by GNU tar inside the sandbox (it must be in the image).
//
// Layout in an instance, for the workspace directory W (Config.Workspace,
// absolute):
//
//	W                              the workspace
//	dir(W)/.lifeboat-base(W)/staging/N  WriteFiles trees awaiting Switch
//	dir(W)/.lifeboat-base(W)/old/N      the previous tree during a Switch
//	dir(W)/.lifeboat-base(W)/tmp/       listings, archives and stdin in transit (removed after use)
//
// Commands run with dir(W) (or W, for Exec) as their working directory and
// name everything by relative paths.
//
// ReadFiles mirrors incrementally into CacheDir/<instance>: GNU find lists
// the workspace, and only what changed travels (one tar archive); see
// sync.go. GNU find must be in the image too.
// WriteFiles keeps hard links and fifos (GNU tar extracts them) but not
// xattrs, owners or holes (FileSupport says so). Switch exchanges the
// trees in one rename where the sandbox's mv has --exchange (coreutils
// 9.5+), else in two renames with the old tree put back if the second
// fails; a sandbox killed between the two is left with the old tree under
// old/N and no W.
//
// Invariants: staging paths Switch accepts are only those WriteFiles
// makes (dir(W)/.lifeboat-base(W)/staging/<ValidName>); the local mirror is
// written through an os.Root (tartree.Extract), so nothing a sandbox sends
// lands outside CacheDir; a not-found answer of the data plane is never
// Missing (the Box reports it as KindConflict).
package boxfiles
