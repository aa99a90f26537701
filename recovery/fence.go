package recovery

import (
	"errors"
	"fmt"
)

// ErrLost: the provider confirmed the workspace's instance missing; it
// waits for an approved recovery.
var ErrLost = errors.New("workspace instance is lost")

// Refused: the capture was refused before it started, because the
// workspace is being recovered or its instance is lost, or (a provider
// without file access) after the native checkpoint (see Receipt.Error).
const Refused Outcome = "refused"

// captureFence refuses captures (and restarts) of a workspace that is
// being recovered, or whose instance the provider confirmed missing: a
// capture then could only read what is left of the lost instance and
// must not replace the last good checkpoint the recovery offers.
func captureFence(w Workspace) error {
	if err := guard(w); err != nil {
		return err
	}
	if w.Health != nil && w.Health.State == HealthLost {
		return fmt.Errorf("%w: the provider confirmed instance %s of %s missing; its last good checkpoint is kept for recovery",
			ErrLost, w.Instance, w.ID)
	}
	return nil
}
