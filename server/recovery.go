package server

import (
	"context"
	"time"

	"lifeboat/providers"
	"lifeboat/recovery"
)

// Lifecycle is the checkpoint lifecycle's part of the server's seam to
// package recovery: registered workspaces, their checkpoint history,
// captures, parks, restarts and registered processes, in recovery's own
// types and errors. *recovery.Lifecycle is the real one.
type Lifecycle interface {
	Workspaces() ([]recovery.Workspace, error)
	Workspace(id string) (recovery.Workspace, error)
	Checkpoints(ws string) ([]recovery.Checkpoint, error)
	// Intervals are w's effective park and periodic intervals.
	Intervals(w recovery.Workspace) (park, periodic time.Duration)
	ProviderNames() []string
	Provider(name string) (providers.Provider, bool)
	AddWorkspace(ctx context.Context, nw recovery.NewWorkspace) (recovery.Workspace, error)
	ChangeWorkspace(ctx context.Context, ws string, c recovery.WorkspaceChange) (recovery.Workspace, error)
	RemoveWorkspace(ctx context.Context, ws string, forget bool) (recovery.Removed, error)
	Restart(ctx context.Context, ws string) (recovery.RestartReceipt, error)
	Capture(ctx context.Context, ws string, reason recovery.Reason) recovery.Receipt
	Park(ctx context.Context, ws string) recovery.Receipt
	StartProcess(ws string, argv []string, dir string) (*recovery.Process, error)
	Process(ws, id string) (*recovery.Process, error)
	Processes(ws string) ([]recovery.RegisteredProcess, error)
	Record(p *recovery.Process) recovery.RegisteredProcess
}

var _ Lifecycle = (*recovery.Lifecycle)(nil)

// RecoveryService is the server's one seam to package recovery: every
// route goes through it, in recovery's own types and errors. Lifecycle is
// the checkpoint lifecycle's part; the methods below are the recovery
// state machine's (recovery.Service: loss detection, offer, approval,
// operations, lost processes, repair holds). NewRecovery puts the real one
// together; the server shows it in the API's words (recoveryView).
//
// Contract (recovery.Service keeps it):
//   - Methods are safe for concurrent use and return errors that wrap the
//     recovery package's sentinels (recovery.ErrUnknownWorkspace,
//     ErrUnknownOperation, ErrUnknownHold, ErrUnknownProcess, ErrRecovering,
//     ErrStaleGeneration, ErrHoldResolved, ...), which the server answers
//     with a stable code (errorCodes).
//   - Approve and RestartProcess are idempotent per key: a repeated or
//     concurrent call with the same key returns the same operation or
//     restart and starts nothing new. A key reused for a different request
//     fails with recovery.ErrKeyReused.
//   - Approve fails with recovery.ErrStaleOffer when checkpoint is not the
//     one offered now, and with recovery.ErrNotLost (or ErrNoCheckpoint)
//     when nothing is offered.
//   - Every change of a workspace's recovery state, an operation, a
//     process restart or a repair hold is sent as one Event on the channel
//     of every Subscribe, in the order it happened. The channel is closed
//     when cancel is called.
type RecoveryService interface {
	Lifecycle
	// State is ws's recovery state as stored; Check inspects its instance
	// now.
	State(ws string) (recovery.WorkspaceState, error)
	Check(ctx context.Context, ws string) (recovery.Health, error)
	Offer(ctx context.Context, ws string) (recovery.Offer, error)
	Approve(ctx context.Context, ws, checkpoint, key string) (recovery.Operation, error)
	Operation(id string) (recovery.Operation, error)
	// Operations lists the operations of ws ("" for all), oldest first.
	Operations(ws string) ([]recovery.Operation, error)
	LostProcesses(ws string) ([]recovery.LostProcess, error)
	RestartProcess(ctx context.Context, ws string, index int, key string) (recovery.ProcessRestart, error)
	// RepairHolds lists the unresolved holds, AllHolds every one.
	RepairHolds() ([]recovery.Hold, error)
	AllHolds() ([]recovery.Hold, error)
	Hold(id string) (recovery.Hold, error)
	// Allocation is the allocation hold id keeps, as the provider reports
	// it now; StopHold stops it (again).
	Allocation(ctx context.Context, id string) (recovery.Allocation, error)
	StopHold(ctx context.Context, id string) (recovery.Hold, error)
	ResolveHold(id string, outcome recovery.HoldOutcome, evidence string) (recovery.Hold, error)
	Subscribe() (events <-chan recovery.Event, cancel func())
}

// NewRecovery is the seam over svc and the lifecycle it recovers the
// workspaces of. It owns nothing: the caller runs and closes both.
func NewRecovery(svc *recovery.Service) RecoveryService {
	return serviceSeam{svc.Lifecycle(), svc}
}

// serviceSeam is the real RecoveryService.
type serviceSeam struct {
	*recovery.Lifecycle
	*recovery.Service
}

// Recovery states of a workspace. Only StateLost comes with an offer.
const (
	StateHealthy     = "healthy"      // the instance answers as running (or parked)
	StateLost        = "lost"         // the provider confirmed the instance missing; recovery is offered
	StateUnreachable = "unreachable"  // the provider is unavailable; checked again at NextCheck
	StateAuthFailed  = "auth_failed"  // the provider refused our credentials
	StateRateLimited = "rate_limited" // the provider asked us to slow down
	StateRecovering  = "recovering"   // an approved operation runs; bot operations are refused
	StateFailed      = "failed"       // the last operation failed; see Operation
	StateUnchecked   = "unchecked"    // the instance was not inspected yet
)

// RecoveryState is what every client shows for one workspace.
type RecoveryState struct {
	Workspace  string     `json:"workspace"`
	State      string     `json:"state"`
	Action     string     `json:"action,omitempty"` // what to do, for people
	Detail     string     `json:"detail,omitempty"` // the last inspection's finding: the provider's words or error
	CheckedAt  *time.Time `json:"checked_at,omitempty"`
	NextCheck  *time.Time `json:"next_check,omitempty"`
	Instance   string     `json:"instance"`
	Generation uint64     `json:"generation"`
	Operation  string     `json:"operation,omitempty"` // the current or last operation id
	Offer      *Offer     `json:"offer,omitempty"`     // set when State is lost
	// Holds are the workspace's unresolved repair holds.
	Holds   []RepairHold `json:"holds"`
	Updated time.Time    `json:"updated"`
}

// Offer is what the user sees before approving a recovery.
type Offer struct {
	Workspace      string        `json:"workspace"`
	Checkpoint     string        `json:"checkpoint"` // the snapshot id to approve
	CheckpointTime time.Time     `json:"checkpoint_time"`
	AgeSeconds     float64       `json:"age_seconds"`
	Files          uint64        `json:"files"` // the checkpoint's files and bytes
	Bytes          uint64        `json:"bytes"`
	Profile        bool          `json:"profile"`         // a browser profile is included
	Profiles       []string      `json:"profiles"`        // the profiles' slash paths
	ProfileLocked  bool          `json:"profile_locked"`  // this server's key cannot open them: only the files come back
	NotRecoverable []string      `json:"not_recoverable"` // running processes, later changes, provider state
	LostProcesses  []LostProcess `json:"lost_processes"`
	// Candidates are the checkpoints an approval may name, newest first:
	// the last good one, then earlier ones, each with whether it can be
	// read now.
	Candidates []recovery.Candidate `json:"candidates"`
	Warning    string               `json:"warning,omitempty"` // why Checkpoint is not the last good one
}

// Operation is one approved recovery, a persisted state machine.
type Operation struct {
	ID             string    `json:"id"`
	Workspace      string    `json:"workspace"`
	Checkpoint     string    `json:"checkpoint"`
	IdempotencyKey string    `json:"idempotency_key"`
	Generation     uint64    `json:"generation"`
	Step           string    `json:"step"` // approved, creating, restoring, validating, switching, recovered, failed
	NewInstance    string    `json:"new_instance,omitempty"`
	Error          string    `json:"error,omitempty"`
	Action         string    `json:"action,omitempty"` // what fixes a failed operation
	Created        time.Time `json:"created"`
	Updated        time.Time `json:"updated"`
}

// LostProcess is a process recorded with the checkpoint a workspace was
// recovered from: it did not survive, and can be restarted on request.
type LostProcess struct {
	ID         string     `json:"id"`
	Command    []string   `json:"command"`
	Dir        string     `json:"dir"`
	Started    time.Time  `json:"started"`
	Ended      *time.Time `json:"ended,omitempty"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	LastOutput string     `json:"last_output"`
	Truncated  bool       `json:"truncated"`
	State      string     `json:"state"` // lost, restarting, restarted, restart_failed
	// Restart is its latest restart, once one was asked for.
	Restart *ProcessRestart `json:"restart,omitempty"`
}

// ProcessRestart is the answer to one restart request.
type ProcessRestart struct {
	Workspace      string    `json:"workspace"`
	Process        string    `json:"process"`
	IdempotencyKey string    `json:"idempotency_key"`
	State          string    `json:"state"`
	ExitCode       *int      `json:"exit_code,omitempty"` // the restarted command's, once it returned
	Output         string    `json:"output,omitempty"`    // its last output, bounded and redacted, once it returned
	Requested      time.Time `json:"requested"`
	Error          string    `json:"error,omitempty"`
}

// RepairHold is a source allocation kept after a copy-back failed; only an
// operator's resolution clears it.
type RepairHold struct {
	ID             string    `json:"id"`
	Workspace      string    `json:"workspace"`
	Operation      string    `json:"operation"`
	Provider       string    `json:"provider"`
	Checkpoint     string    `json:"checkpoint"`
	SourceInstance string    `json:"source_instance"`
	TargetInstance string    `json:"target_instance"`
	Error          string    `json:"error"`
	Created        time.Time `json:"created"`
	// Stop is the receipt of stopping the kept allocation.
	Stop       *recovery.StopReceipt `json:"stop,omitempty"`
	Resolution *Resolution           `json:"resolution,omitempty"`
}

// RepairHoldDetail is a hold with its kept allocation as the provider
// reports it now.
type RepairHoldDetail struct {
	RepairHold
	Allocation recovery.Allocation `json:"allocation"`
}

// Resolution is an operator's answer to a repair hold.
type Resolution struct {
	Outcome  string    `json:"outcome"`  // e.g. copied_back, discarded, escalated
	Evidence string    `json:"evidence"` // what the operator checked
	Operator string    `json:"operator"` // the token's label, filled in by the server
	Time     time.Time `json:"time"`
}

// Event is one change, as the server shows it: it numbers it and sends it
// to every event stream.
type Event struct {
	Type      string `json:"type"` // recovery_state, operation, process, repair_hold (and receipt, from the lifecycle)
	Workspace string `json:"workspace,omitempty"`
	Data      any    `json:"data"`
}
