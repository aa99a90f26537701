package managedagents

import "errors"

var errNoCheckpointID = errors.New("POST .../checkpoints answered without a checkpoint_id")
