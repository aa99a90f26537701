package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"lifeboat/config"
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
	configPath   string   // --config: the service's config file
	sets         []string // --set KEY=VALUE overrides of the config
	serverURL    string   // --server: talk to a running lifeboat serve
	tokenFile    string   // --token-file: the bearer token sent to it
	json         bool
	lockWait     time.Duration
	keyCacheTTL  time.Duration // --key-cache: how long the kernel keyring keeps a derived key (0: not at all)
	prompted     bool          // the password came from the terminal: no key is cached for it
	prof         profiler
	serving      bool // set by serve: the repository stays open for many captures (repoOptions)

	stdin io.Reader
	out   *printer
	cfg   *config.Config // loaded when --config (or LIFEBOAT_CONFIG) is given
	root  *cobra.Command
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
			if isGroup(cmd) {
				return nil // it only shows its help
			}
			if err := refuseNegativeFlags(cmd.Flags()); err != nil {
				return err
			}
			if err := g.lockWaitFromEnv(cmd.Flags()); err != nil {
				return err
			}
			if err := durationFromEnv(cmd.Flags(), "key-cache", keyCacheEnv, &g.keyCacheTTL); err != nil {
				return err
			}
			if err := g.checkKeyCache(); err != nil {
				return err
			}
			if err := g.applyConfig(cmd); err != nil {
				return err
			}
			return g.prof.start()
		},
		PersistentPostRunE: func(cmd *cobra.Command, _ []string) error {
			return g.prof.stop()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	f := root.PersistentFlags()
	f.StringVarP(&g.repo, "repo", "r", envOr("LIFEBOAT_REPO", defaultRepo()), "repository location: a directory, or s3:https://HOST[:PORT]/BUCKET[/PREFIX] with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set (env LIFEBOAT_REPO)")
	f.StringVar(&g.passwordFile, "password-file", os.Getenv("LIFEBOAT_PASSWORD_FILE"), "read the password from this file (env LIFEBOAT_PASSWORD_FILE; or set LIFEBOAT_PASSWORD)")
	f.StringVar(&g.cacheDir, "cache-dir", os.Getenv("LIFEBOAT_CACHE_DIR"), "local cache directory (env LIFEBOAT_CACHE_DIR; default: the user cache dir)")
	f.StringVar(&g.keyHint, "key-hint", os.Getenv("LIFEBOAT_KEY_HINT"), "try only key files whose id starts with this")
	f.StringVar(&g.stateDir, "state-dir", os.Getenv("LIFEBOAT_STATE_DIR"), "lifecycle state directory: workspaces, last good checkpoints, recovery records (env LIFEBOAT_STATE_DIR); needed by workspace, park and capture --workspace without PATH")
	f.StringVar(&g.localRoot, "local-root", os.Getenv("LIFEBOAT_LOCAL_ROOT"), "directory whose subdirectories are the local provider's workspace instances (env LIFEBOAT_LOCAL_ROOT)")
	f.StringVar(&g.configPath, "config", os.Getenv("LIFEBOAT_CONFIG"), "the service's config file (TOML; env LIFEBOAT_CONFIG; see docs/configuration.md): flags and environment variables override it; lifecycle commands then talk to the server it names")
	f.StringArrayVar(&g.sets, "set", nil, "override one config key (`KEY=VALUE`, e.g. server.listen=127.0.0.1:9000 or providers.box1.port=2222; repeatable)")
	f.StringVar(&g.serverURL, "server", os.Getenv("LIFEBOAT_SERVER"), "talk to a running lifeboat serve at `URL` for workspace, capture, park, restart, recovery and process commands (env LIFEBOAT_SERVER; default with --config: the server it names)")
	f.StringVar(&g.tokenFile, "token-file", os.Getenv("LIFEBOAT_TOKEN_FILE"), "file holding the bearer token sent to --server (env LIFEBOAT_TOKEN_FILE; default with --config: [server] token_file)")
	f.BoolVar(&g.json, "json", false, "print JSON lines, each with a message_type")
	f.DurationVar(&g.lockWait, "lock-wait", lockWaitDefault, "wait this long for another process's repository lock, then fail with exit code 12 (env LIFEBOAT_LOCK_WAIT; 0: do not wait)")
	f.DurationVar(&g.keyCacheTTL, "key-cache", keyCacheDefault, "keep the key derived from a password file or LIFEBOAT_PASSWORD this long (at most 24h) in the user's kernel keyring, sealed under the password, so that the next commands skip the derivation (env LIFEBOAT_KEY_CACHE; 0: keep none; see docs/keys.md)")
	f.StringVar(&g.prof.cpuPath, "cpuprofile", "", "write a CPU profile to this file")
	f.StringVar(&g.prof.memPath, "memprofile", "", "write an allocation profile to this file")
	f.StringVar(&g.prof.tracePath, "trace", "", "write a Go execution trace to this file (go tool trace)")
	root.AddCommand(newInitCommand(g), newExportCommand(g), newKeyCommand(g), newRepairCommand(g), newCatCommand(g), newCheckCommand(g),
		newSnapshotsCommand(g), newLsCommand(g), newDiffCommand(g),
		newCaptureCommand(g), newWorkspaceCommand(g), newParkCommand(g), newRestoreCommand(g), newDemoCommand(g),
		newForgetCommand(g), newPolicyCommand(g), newPruneCommand(g), newUnlockCommand(g), newReserveCommand(g), newServeCommand(g),
		newConfigCommand(g), newRestartCommand(g), newRecoveryCommand(g), newProcessCommand(g), newProviderCommand(g))
	refuseUnknownSubcommands(root)
	g.root = root
	return root
}

// refuseUnknownSubcommands makes every command below root that only
// groups subcommands (key, repair, policy, ...) show its help when given
// no arguments and refuse any other word as an unknown command (exit 2).
// Cobra itself shows the help of such a command and exits 0 whatever
// follows it, so a misspelled subcommand would look like success. Cobra's
// own completion group is added here, not when the command runs, so that
// it is one of them.
func refuseUnknownSubcommands(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.HasSubCommands() && sub.Run == nil && sub.RunE == nil {
				sub.Args = unknownSubcommand
				sub.SuggestionsMinimumDistance = 2
				sub.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			}
			walk(sub)
		}
	}
	walk(root)
	refuseUnknownHelpTopics(root)
}

// refuseUnknownHelpTopics makes `lifeboat help WORD...` refuse a WORD that
// is not a command (exit 2): cobra's own help command prints "Unknown help
// topic" and the usage, and exits 0.
func refuseUnknownHelpTopics(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	help, _, err := root.Find([]string{"help"})
	if err != nil || help.Run == nil {
		return
	}
	show := help.Run
	help.Run = nil
	help.RunE = func(cmd *cobra.Command, args []string) error {
		if target, rest, err := root.Find(args); err != nil || target == nil || len(rest) > 0 {
			return usageError{fmt.Sprintf("unknown help topic %q: run `%s help` for the commands", strings.Join(args, " "), root.Name())}
		}
		show(cmd, args)
		return nil
	}
}

// isGroup says whether cmd is a command below root that only groups
// subcommands (refuseUnknownSubcommands).
func isGroup(cmd *cobra.Command) bool { return cmd.HasParent() && cmd.HasSubCommands() }

// unknownSubcommand refuses the arguments of a group command: its first
// argument was not one of its subcommands. The message starts as cobra's
// own ("unknown command"), which exitCode maps to exit 2.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageError{msg + "; run `" + cmd.CommandPath() + " --help` for its subcommands"}
}

// nonNegativeFlags are the count and duration flags, of any command, for
// which a negative value means nothing; refuseNegativeFlags refuses one.
var nonNegativeFlags = []string{"lock-wait", "key-cache", "readers", "workers"}

// refuseNegativeFlags refuses a negative value given to one of
// nonNegativeFlags (a usage error naming the flag).
func refuseNegativeFlags(flags *pflag.FlagSet) error {
	for _, name := range nonNegativeFlags {
		f := flags.Lookup(name)
		if f == nil || !f.Changed || !strings.HasPrefix(f.Value.String(), "-") {
			continue
		}
		return usageError{fmt.Sprintf("--%s %s: want 0 or more (0: %s)", name, f.Value, zeroMeaning(name))}
	}
	return nil
}

func zeroMeaning(flag string) string {
	switch flag {
	case "lock-wait":
		return "do not wait"
	case "key-cache":
		return "keep no key"
	}
	return "the default, twice the CPUs"
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
