package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"lifeboat/crypt"
)

// globalOptions are the flags every command shares.
type globalOptions struct {
	repo         string
	passwordFile string
	cacheDir     string
	keyHint      string
	stateDir     string
	localRoot    string
	json         bool
	lockWait     time.Duration
	prof         profiler

	stdin io.Reader
	out   *printer
}

func newRootCommand(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:           "lifeboat",
		Short:         "Checkpoint and recover agent sandbox workspaces",
		Long:          "Lifeboat keeps versioned, encrypted, deduplicated checkpoints of a workspace in a repository that lives apart from the sandbox.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.out.json = g.json
			return g.prof.start()
		},
		PersistentPostRunE: func(cmd *cobra.Command, _ []string) error {
			return g.prof.stop()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	f := root.PersistentFlags()
	f.StringVarP(&g.repo, "repo", "r", envOr("LIFEBOAT_REPO", defaultRepo()), "repository location (env LIFEBOAT_REPO)")
	f.StringVar(&g.passwordFile, "password-file", os.Getenv("LIFEBOAT_PASSWORD_FILE"), "read the password from this file (env LIFEBOAT_PASSWORD_FILE; or set LIFEBOAT_PASSWORD)")
	f.StringVar(&g.cacheDir, "cache-dir", os.Getenv("LIFEBOAT_CACHE_DIR"), "local cache directory (env LIFEBOAT_CACHE_DIR; default: the user cache dir)")
	f.StringVar(&g.keyHint, "key-hint", os.Getenv("LIFEBOAT_KEY_HINT"), "try only key files whose id starts with this")
	f.StringVar(&g.stateDir, "state-dir", os.Getenv("LIFEBOAT_STATE_DIR"), "lifecycle state directory: workspaces, last good checkpoints, recovery records (env LIFEBOAT_STATE_DIR); needed by workspace, park and capture --workspace without PATH")
	f.StringVar(&g.localRoot, "local-root", os.Getenv("LIFEBOAT_LOCAL_ROOT"), "directory whose subdirectories are the local provider's workspace instances (env LIFEBOAT_LOCAL_ROOT)")
	f.BoolVar(&g.json, "json", false, "print JSON lines, each with a message_type")
	f.DurationVar(&g.lockWait, "lock-wait", envDuration("LIFEBOAT_LOCK_WAIT", lockWaitDefault), "wait this long for another process's repository lock, then fail with exit code 12 (env LIFEBOAT_LOCK_WAIT; 0: do not wait)")
	f.StringVar(&g.prof.cpuPath, "cpuprofile", "", "write a CPU profile to this file")
	f.StringVar(&g.prof.memPath, "memprofile", "", "write an allocation profile to this file")
	f.StringVar(&g.prof.tracePath, "trace", "", "write a Go execution trace to this file (go tool trace)")
	root.AddCommand(newInitCommand(g), newExportCommand(g), newKeyCommand(g), newRepairCommand(g), newCatCommand(g), newCheckCommand(g),
		newSnapshotsCommand(g), newLsCommand(g), newDiffCommand(g),
		newCaptureCommand(g), newWorkspaceCommand(g), newParkCommand(g), newRestoreCommand(g), newDemoCommand(g), newBenchCommand(g),
		newForgetCommand(g), newPolicyCommand(g), newPruneCommand(g), newUnlockCommand(g), newServeCommand(g))
	return root
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// defaultRepo is the local repository used when none is named:
// $XDG_DATA_HOME/lifeboat/repo, or ~/.local/share/lifeboat/repo.
func defaultRepo() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "lifeboat", "repo")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "lifeboat", "repo")
	}
	return "lifeboat-repo"
}

// kdfFlags adds the argon2id cost flags to commands that make keys.
type kdfFlags struct {
	memoryKiB uint32
	time      uint32
}

func (k *kdfFlags) params() crypt.KDFParams { return crypt.NewKDFParams(k.time, k.memoryKiB, 0) }

func (k *kdfFlags) add(f *pflag.FlagSet) {
	f.Uint32Var(&k.memoryKiB, "kdf-memory-kib", 0, fmt.Sprintf("argon2id memory in KiB for the new key (default %d)", crypt.DefaultKDFMemoryKiB))
	f.Uint32Var(&k.time, "kdf-time", 0, fmt.Sprintf("argon2id passes for the new key (default %d)", crypt.DefaultKDFTime))
}
