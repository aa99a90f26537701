package recovery

import (
	"time"

	"lifeboat/providers"
)

// Reason says what asked for a capture.
type Reason string

const (
	ReasonPark     Reason = "park"     // the server is about to park the sandbox
	ReasonPeriodic Reason = "periodic" // the background schedule
	ReasonManual   Reason = "manual"   // Capture on demand
)

// Workspace is one workspace the lifecycle knows. Its ID never changes;
// Instance and Generation change when it is restarted or recovered into
// another instance.
type Workspace struct {
	ID         string               `json:"id"`
	Provider   string               `json:"provider"`
	Instance   providers.InstanceID `json:"instance"`
	Generation uint64               `json:"generation"` // fencing token; +1 at every instance change
	Created    time.Time            `json:"created"`
	// Settings override the lifecycle's defaults for this workspace.
	Settings Settings `json:"settings,omitzero"`

	// LastGood is the newest complete, verified checkpoint; nil before the
	// first one.
	LastGood *Checkpoint `json:"last_good,omitempty"`
	// Fingerprint is the keyed digest of the file listing LastGood was
	// taken from (change detection; see fingerprint.go).
	Fingerprint []byte `json:"fingerprint,omitempty"`
	// Native is the stored provider-native checkpoint, the newest one.
	Native *NativeCheckpoint `json:"native,omitempty"`
	// Failures counts attempts that failed since the last good checkpoint.
	Failures int `json:"failures"`
	// Recovery holds the newest failure records (at most maxRecords).
	Recovery []RecoveryRecord `json:"recovery,omitempty"`
	// InFlight is set while a capture runs and cleared when it ends; one
	// found when the store is opened belongs to a process that died.
	InFlight *InFlight `json:"in_flight,omitempty"`
	// LastRestart records the last rollback to a native checkpoint.
	LastRestart *RestartRecord `json:"last_restart,omitempty"`
	// Health is what the last inspection of Instance found (health.go);
	// nil before the first.
	Health *Health `json:"health,omitempty"`
	// Operation is the id of the recovery operation running for the
	// workspace; while it is set, bot operations and captures are refused
	// with ErrRecovering.
	Operation string `json:"operation,omitempty"`
	// Lost are the processes of the checkpoint the workspace was last
	// recovered from, reported lost (lost.go).
	Lost *LostSet `json:"lost,omitempty"`
}

// Settings are a workspace's own intervals; zero means the lifecycle's
// default (Config.ParkInterval, Config.PeriodicInterval, or the
// per-workspace value of Config.Overrides).
type Settings struct {
	ParkInterval     time.Duration `json:"park_interval,omitempty"`
	PeriodicInterval time.Duration `json:"periodic_interval,omitempty"`
}

// Checkpoint is a promoted portable checkpoint: a snapshot in the
// repository, with the process records that were current when it was taken.
type Checkpoint struct {
	Snapshot   string               `json:"snapshot"` // snapshot id, hex
	Time       time.Time            `json:"time"`     // when the capture started
	Reason     Reason               `json:"reason"`
	Instance   providers.InstanceID `json:"instance"`
	Generation uint64               `json:"generation"`
	Files      uint64               `json:"files"`
	Bytes      uint64               `json:"bytes"`
	Processes  []ProcessRecord      `json:"processes"`
}

// NativeCheckpoint is a provider-native checkpoint taken after a portable one.
type NativeCheckpoint struct {
	ID       providers.CheckpointID `json:"id"`
	Time     time.Time              `json:"time"`
	Instance providers.InstanceID   `json:"instance"`
	Snapshot string                 `json:"snapshot"` // the last good portable checkpoint when it was taken
}

// RecoveryRecord is what a failed or interrupted attempt leaves.
type RecoveryRecord struct {
	Time    time.Time `json:"time"`
	Reason  Reason    `json:"reason"`
	Attempt int       `json:"attempt"` // failures in a row, this one included
	Outcome Outcome   `json:"outcome"`
	Error   string    `json:"error"`
}

// InFlight marks a capture in progress. ID is the capture's own (random):
// it promotes its checkpoint, and clears the mark, only while the mark
// is still its own.
type InFlight struct {
	Started time.Time `json:"started"`
	Reason  Reason    `json:"reason"`
	PID     int       `json:"pid"`
	ID      string    `json:"id,omitempty"`
}

// RestartRecord is the last Restart of a workspace.
type RestartRecord struct {
	Time       time.Time              `json:"time"`
	Checkpoint providers.CheckpointID `json:"checkpoint"`
	From       providers.InstanceID   `json:"from"`
	To         providers.InstanceID   `json:"to"`
}

// PendingDelete is a native checkpoint whose delete failed; it is retried
// on the workspace's next park.
type PendingDelete struct {
	Workspace  string                 `json:"workspace"`
	Provider   string                 `json:"provider"`
	Checkpoint providers.CheckpointID `json:"checkpoint"`
	Since      time.Time              `json:"since"`
	Attempts   int                    `json:"attempts"`
	LastError  string                 `json:"last_error"`
}

// maxRecords bounds the recovery records kept per workspace, and
// maxCheckpoints the checkpoint history.
const (
	maxRecords     = 50
	maxCheckpoints = 100
)

func (w *Workspace) addRecord(r RecoveryRecord) {
	w.Recovery = append(w.Recovery, r)
	if n := len(w.Recovery) - maxRecords; n > 0 {
		w.Recovery = append([]RecoveryRecord(nil), w.Recovery[n:]...)
	}
}
