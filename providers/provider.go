// Package providers is where workspaces live: one small interface over
// the places a bot's sandbox can be (a directory on this machine, a host
// reached over SSH, an HTTP sandbox platform), with one typed error model.
//
// The lifecycle (recovery/) talks only to Provider. An adapter maps its
// platform's answers into Status and *Error in one table, so the rest of
// Lifeboat never sees a status code.
package providers

import (
	"context"
	"io"
	"time"
)

// InstanceID is a provider's native id of one sandbox instance. It changes
// when a workspace is recovered into a replacement; the workspace id never
// does.
type InstanceID string

// State is what Inspect found. Anything Inspect could not establish is an
// *Error, never a State.
type State string

const (
	// Running: the instance exists and its files can be read.
	Running State = "running"
	// Stopped: the instance exists but is stopped or paused; its files
	// survive and it can be started again.
	Stopped State = "stopped"
	// Missing: the provider confirmed, through its control plane, that the
	// instance no longer exists. Only this state may lead to recovery.
	Missing State = "missing"
)

// Status is the result of Inspect.
type Status struct {
	State      State
	Instance   InstanceID
	Detail     string    // the provider's own words, for people
	ObservedAt time.Time // when the provider answered
}

// Capabilities say which optional operations an adapter supports; callers
// check them rather than calling and failing.
type Capabilities struct {
	Files             bool // ReadFiles and WriteFiles work
	BrowserProfile    bool // the instance can hold a browser profile the provider lets us stop and copy
	NativeCheckpoints bool // Checkpoint, Rollback and DeleteCheckpoint work
	Pause             bool // the provider can pause an instance (Exec is used to quiesce otherwise)
	Exec              bool // Exec works
	Create            bool // Create and Destroy work
}

// CreateSpec describes a replacement instance.
type CreateSpec struct {
	// IdempotencyKey makes Create safe to retry: a second Create with the
	// same key returns the instance the first one made (or is making),
	// never a second instance.
	IdempotencyKey string
	// Template is adapter-specific (an image, a template id, a directory to
	// copy); empty means the adapter's default.
	Template string
	Labels   map[string]string
}

// ExecResult is what a command run in an instance returned.
type ExecResult struct {
	ExitCode int
	Stdout   []byte // bounded by the adapter; see its doc
	Stderr   []byte
}

// CheckpointID names a provider-native checkpoint.
type CheckpointID string

// Provider is one place where workspace instances live.
//
// Contract, for every method:
//   - ctx bounds the call; an adapter must return promptly once it is done,
//     with an *Error of KindUnavailable wrapping ctx.Err().
//   - Every failure is an *Error (see errors.go) whose Kind says what the
//     caller may do; adapters never return bare transport errors.
//   - A "not found" from a data-plane endpoint (a file API, an exec
//     endpoint) is never reported as Missing: only Inspect may say Missing,
//     and only after the control plane confirmed it. Other methods report
//     an instance they cannot find as KindConflict ("Inspect confirms
//     whether it is missing").
//   - Methods are safe for concurrent use.
//   - An adapter touches nothing outside the instances it manages: a local
//     adapter never reads or writes outside its root.
type Provider interface {
	// Name is the adapter's name ("local", "ssh", "e2b", ...).
	Name() string
	// Capabilities reports what this adapter supports.
	Capabilities() Capabilities
	// Inspect reports the instance's state. A confirmed absence is
	// Status{State: Missing} with a nil error; an outage, an auth failure
	// or a rate limit is an *Error, never Missing.
	Inspect(ctx context.Context, id InstanceID) (Status, error)
	// Create makes a replacement instance (see CreateSpec.IdempotencyKey).
	Create(ctx context.Context, spec CreateSpec) (InstanceID, error)
	// Destroy removes an instance. Destroying a missing instance is not
	// an error.
	Destroy(ctx context.Context, id InstanceID) error
	// ReadFiles makes the instance's workspace readable as a local
	// directory tree for capture: for a local instance its own directory,
	// for a remote one a local mirror brought up to date (only changed
	// files are transferred). The returned Files must be closed; the
	// directory stays valid until then.
	ReadFiles(ctx context.Context, id InstanceID) (Files, error)
	// WriteFiles copies the local tree src into a new staging directory
	// inside the instance and returns that directory's path in the
	// instance. Nothing outside the staging directory is touched; the
	// caller validates it and then calls Switch. What the copy keeps
	// beyond directories, regular files, symlinks, modes and mtimes is
	// what FileSupporter reports. An entry the adapter cannot create (a
	// socket, a device, a fifo where Fifos is false) is KindUnsupported
	// and an access refusal KindPermission, both naming the entry's path
	// relative to the tree. WriteFiles calls WriteStarted(ctx) right
	// before its first change inside the instance (creating the staging
	// directory counts) and never when it fails before that.
	WriteFiles(ctx context.Context, id InstanceID, src string) (staging string, err error)
	// Switch atomically puts a staging directory from WriteFiles in place
	// of the instance's workspace, keeping the old tree until the switch
	// holds; an error leaves the workspace as it was. It calls
	// WriteStarted(ctx) right before its first change in the instance.
	Switch(ctx context.Context, id InstanceID, staging string) error
	// Exec runs a command in the instance (quiescing, process listing).
	Exec(ctx context.Context, id InstanceID, argv []string, stdin io.Reader) (ExecResult, error)
	// Checkpoint takes a provider-native checkpoint of the instance.
	Checkpoint(ctx context.Context, id InstanceID) (CheckpointID, error)
	// Rollback restores the instance from a native checkpoint. It returns
	// the instance id afterwards, which may differ from id.
	Rollback(ctx context.Context, id InstanceID, cp CheckpointID) (InstanceID, error)
	// DeleteCheckpoint removes a native checkpoint; deleting one that is
	// already gone is not an error.
	DeleteCheckpoint(ctx context.Context, cp CheckpointID) error
}

// Pauser is implemented by adapters whose platform can pause and resume an
// instance as a whole (Capabilities.Pause); callers find it with a type
// assertion. Without it the lifecycle quiesces through Exec.
type Pauser interface {
	Pause(ctx context.Context, id InstanceID) error
	Resume(ctx context.Context, id InstanceID) error
}

// CapturePauser is a Pauser whose paused instances keep their files
// readable (ReadFiles and Checkpoint work while paused): the lifecycle
// pauses such an instance, after its registered writers, for the whole
// capture, so nothing in it writes while it is read. A platform whose
// pause makes files unreachable until Resume (E2B saves the sandbox) is a
// Pauser only.
type CapturePauser interface {
	Pauser
	// PausedFilesReadable reports that a paused instance's files can be
	// read.
	PausedFilesReadable() bool
}

// Stopper is implemented by adapters that can stop a running instance so
// it costs nothing while it is kept (a replacement held for repair after a
// failed recovery); callers find it with a type assertion. Afterwards
// Inspect reports Stopped, with a Detail saying when and that Lifeboat
// stopped it; Destroy still removes the instance. Stopping a stopped
// instance is not an error; stopping one that does not exist is
// KindConflict (Inspect confirms whether it is missing).
type Stopper interface {
	Stop(ctx context.Context, id InstanceID) error
}

// FileSupport says which parts of a tree WriteFiles keeps in an instance,
// beyond what every adapter keeps (directories, regular files and their
// content, symlinks as links, permission bits with setuid, setgid and
// sticky, modification times). A false field is dropped or refused:
//
//	HardLinks  entries of the source sharing an inode share one in the
//	           instance (false: each becomes a separate copy)
//	Xattrs     user.* extended attributes (false: dropped)
//	Fifos      named pipes (false: WriteFiles refuses a source holding one,
//	           KindUnsupported)
//	Sparse     holes of sparse files stay holes (false: written as zeros;
//	           the content is the same)
//	Ownership  owner and group ids (false: files belong to the user the
//	           adapter writes as)
//
// Devices and sockets are never created: WriteFiles refuses them.
type FileSupport struct {
	HardLinks, Xattrs, Fifos, Sparse, Ownership bool
}

// FileSupporter is implemented by adapters with file access. It answers
// for the provider as a whole, with no instance, so the recovery offer can
// say before approval exactly what will not come back. An adapter may
// probe its host (and cache what it found); a failure to reach it is an
// *Error like any other. A ReadFiles view of an instance shows what
// FileSupport claims, so a tree written and read back compares equal on
// those parts.
type FileSupporter interface {
	FileSupport(ctx context.Context) (FileSupport, error)
}

// Files is a readable local view of an instance's workspace.
type Files interface {
	// Dir is the local directory holding the workspace tree.
	Dir() string
	Close() error
}
