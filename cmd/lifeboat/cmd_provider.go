package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/config"
	"lifeboat/livetest"
	"lifeboat/recovery"
	"lifeboat/repo"
)

type providerTestMessage struct {
	MessageType string `json:"message_type"` // "provider_test"
	livetest.Report
}

type providerTestSummary struct {
	MessageType string   `json:"message_type"` // "provider_test_summary"
	Passed      []string `json:"passed"`
	Failed      []string `json:"failed"`
	Blocked     []string `json:"blocked"`
}

func newProviderCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "provider", Short: "Work with the provider instances of the config file"}
	cmd.AddCommand(newProviderTestCommand(g))
	return cmd
}

func newProviderTestCommand(g *globalOptions) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "test NAME | --all",
		Short: "Run the live smoke test against a provider instance: create, write, checkpoint, destroy, recover, compare",
		Long: "Run the whole recovery story once against the real platform behind provider instance NAME of the config file " +
			"(--config): create a disposable instance, write a tree and a browser profile fixture into it, take a native " +
			"checkpoint (where the provider has them) and a portable capture into the configured repository (workspace " +
			"lifeboat-provider-test-NAME), destroy the instance and check the provider confirms it missing, recover the capture " +
			"into a replacement and compare, roll back to the native checkpoint and compare, then destroy every instance and " +
			"checkpoint the test made. It never touches an instance it did not create. --all tests every configured instance; " +
			"one whose credentials are missing (an empty api_key_env, an unreadable key file) is reported blocked, not failed. " +
			"Prints a report naming every check and its result (--json: docs/json.md). Exits 1 when a test failed, or when NAME " +
			"was blocked.",
		Args: func(cmd *cobra.Command, args []string) error {
			if all != (len(args) == 0) || len(args) > 1 {
				return usageError{"give one provider instance NAME or --all"}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.cfg
			if c == nil {
				return usageError{"provider test needs the config file that names the provider instances: --config FILE"}
			}
			var targets []config.Provider
			for _, p := range c.Providers {
				if all || p.InstanceName() == args[0] {
					targets = append(targets, p)
				}
			}
			if len(targets) == 0 {
				if all {
					return usageError{"the config names no provider instances ([providers.NAME])"}
				}
				return usageError{fmt.Sprintf("no provider instance %q in the config; it has: %s", args[0], providerNames(c))}
			}
			return g.withRepo(cmd.Context(), true, func(r *repo.Repository) error {
				return g.providerTests(cmd.Context(), c, r, targets, all)
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "test every provider instance of the config")
	return cmd
}

func providerNames(c *config.Config) string {
	var names []string
	for _, p := range c.Providers {
		names = append(names, p.InstanceName())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// providerTests runs the test of each target in turn and prints each
// report, then a summary with --all.
func (g *globalOptions) providerTests(ctx context.Context, c *config.Config, r *repo.Repository, targets []config.Provider, all bool) error {
	sum := providerTestSummary{MessageType: "provider_test_summary", Passed: []string{}, Failed: []string{}, Blocked: []string{}}
	lock := g.lockOptions("provider test")
	for _, p := range targets {
		rep := g.providerTest(ctx, c, r, p, lock)
		g.out.emit(providerTestMessage{"provider_test", rep}, func(w io.Writer) { printProviderTest(w, rep) })
		switch rep.Result {
		case livetest.Passed:
			sum.Passed = append(sum.Passed, rep.Provider)
		case livetest.Blocked:
			sum.Blocked = append(sum.Blocked, rep.Provider)
		default:
			sum.Failed = append(sum.Failed, rep.Provider)
		}
	}
	if all {
		g.out.emit(sum, func(w io.Writer) {
			fmt.Fprintf(w, "tested %d: passed %s; failed %s; blocked %s\n", len(sum.Passed)+len(sum.Failed),
				listOrNone(sum.Passed), listOrNone(sum.Failed), listOrNone(sum.Blocked))
		})
	}
	switch {
	case len(sum.Failed) > 0:
		return fmt.Errorf("provider test failed for %s", strings.Join(sum.Failed, ", "))
	case !all && len(sum.Blocked) > 0:
		return fmt.Errorf("provider %s was not tested: blocked", sum.Blocked[0])
	}
	return nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// providerTest tests one instance, or reports it blocked when its
// credentials are missing.
func (g *globalOptions) providerTest(ctx context.Context, c *config.Config, r *repo.Repository, p config.Provider, lock repo.LockOptions) livetest.Report {
	if why := credentialsMissing(c, p); why != "" {
		return livetest.BlockedReport(p.InstanceName(), p.Type(), why)
	}
	prov, err := providerInstance(c, p)
	if err != nil {
		rep := livetest.BlockedReport(p.InstanceName(), p.Type(), err.Error())
		rep.Result = livetest.Failed
		return rep
	}
	tmp, err := os.MkdirTemp("", "lifeboat-provider-test-")
	if err != nil {
		rep := livetest.BlockedReport(p.InstanceName(), p.Type(), err.Error())
		rep.Result = livetest.Failed
		return rep
	}
	defer os.RemoveAll(tmp)
	return livetest.Run(ctx, livetest.Options{Name: p.InstanceName(), Type: p.Type(), Provider: prov, TempDir: tmp,
		Seed:     uint64(time.Now().UnixNano()),
		Capturer: &recovery.RepoCapturer{Repo: r}, Restorer: &recovery.RepoRestorer{Repo: r},
		RepoLock: func(ctx context.Context, fn func() error) error {
			return r.Locked(ctx, repo.LockShared, lock, func(*repo.Lock) error { return fn() })
		}})
}

// credentialsMissing says why an instance's credentials cannot be had
// (the message names the variable or file, never a value), or "".
func credentialsMissing(c *config.Config, p config.Provider) string {
	switch p := p.(type) {
	case config.PlatformProvider:
		if _, err := c.Secret(p.APIKey); err != nil {
			return "credentials missing: " + err.Error()
		}
	case config.E2BProvider:
		if _, err := c.Secret(p.APIKey); err != nil {
			return "credentials missing: " + err.Error()
		}
	case config.ManagedAgentsProvider:
		if _, err := c.Secret(p.Token); err != nil {
			return "credentials missing: " + err.Error()
		}
	case config.SSHProvider:
		if _, err := os.Stat(p.KeyFile); err != nil {
			return "credentials missing: key_file: " + errors.Unwrap(err).Error()
		}
	}
	return ""
}

func printProviderTest(w io.Writer, rep livetest.Report) {
	fmt.Fprintf(w, "provider %s (%s): %s", rep.Provider, rep.Type, strings.ToUpper(string(rep.Result)))
	if rep.Reason != "" {
		fmt.Fprintf(w, ": %s", rep.Reason)
	}
	fmt.Fprintln(w)
	for _, ch := range rep.Checks {
		fmt.Fprintf(w, "  %-7s %s (%.1f s)", ch.Result, ch.Name, ch.Seconds)
		if ch.Detail != "" {
			fmt.Fprintf(w, ": %s", ch.Detail)
		}
		fmt.Fprintln(w)
	}
	if rep.Snapshot != "" {
		fmt.Fprintf(w, "  capture kept in the repository: snapshot %s (workspace %s)\n", rep.Snapshot, rep.Workspace)
	}
	if len(rep.Created) > 0 {
		fmt.Fprintf(w, "  created:   %s\n  destroyed: %s\n", strings.Join(rep.Created, ", "), listOrNone(rep.Destroyed))
	}
	if len(rep.Left) > 0 {
		fmt.Fprintf(w, "  LEFT BEHIND: %s\n", strings.Join(rep.Left, ", "))
	}
	if rep.Result != livetest.Blocked {
		fmt.Fprintf(w, "  took %.1f s\n", rep.Seconds)
	}
}
