package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"lifeboat/crypt"
)

func newKeyCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Manage the key files that unlock the repository",
		Long: "Every key file wraps the same master keys under its own password. A key unlocks the workspace tier, " +
			"and optionally the sensitive tier (browser profiles); a workspace-only key holds no sensitive key material at all.",
	}
	cmd.AddCommand(newKeyAddCommand(g), newKeyListCommand(g), newKeyRemoveCommand(g), newKeyPasswdCommand(g))
	return cmd
}

// checked returns the argon2id parameters for a new key, refusing flags
// beyond the documented bounds (docs/keys.md) as a usage error before the
// repository is opened or anything is derived.
func (k *kdfFlags) checked() (crypt.KDFParams, error) {
	p := k.params()
	if err := p.Validate(); err != nil {
		return p, usageError{fmt.Sprintf("--kdf-time %d --kdf-memory-kib %d: %v (see docs/keys.md)", p.Time, p.MemoryKiB, err)}
	}
	return p, nil
}
