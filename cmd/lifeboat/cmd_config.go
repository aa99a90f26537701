package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat/config"
	"lifeboat/server"
)

type configShowMessage struct {
	MessageType string `json:"message_type"` // "config"
	TOML        string `json:"toml"`         // the configuration in effect, with sources, secrets redacted
}

type configCheckMessage struct {
	MessageType string          `json:"message_type"` // "config_check"
	File        string          `json:"file"`
	OK          bool            `json:"ok"`
	Errors      []*config.Error `json:"errors"`
}

func newConfigCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check the service's config file, or show the configuration in effect",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Check a config file: every problem is named with its file, line and key (exit code 2)",
		Long: "Check FILE as `lifeboat serve --config FILE` would read it, with the environment and --set overrides: unknown keys, " +
			"wrong types, bad durations, missing secret files, unknown provider types; then, when the file has no such problem, " +
			"what serve reads at start: the token file's lines and each ssh provider's key_file. Every problem is printed with its " +
			"file, line and key; any problem exits with code 2.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := config.Load(config.Options{Path: args[0], LookupEnv: os.LookupEnv, Sets: g.configSets(cmd, nil)})
			msg := configCheckMessage{MessageType: "config_check", File: args[0], Errors: []*config.Error{}}
			var errs config.Errors
			switch {
			case errors.As(err, &errs):
				msg.Errors = errs
			case err != nil:
				return usageError{err.Error()}
			default:
				msg.Errors = secretFileProblems(c, args[0])
			}
			msg.OK = len(msg.Errors) == 0
			g.out.emit(msg, func(w io.Writer) {
				if msg.OK {
					fmt.Fprintf(w, "%s: ok\n", args[0])
				}
				for _, e := range msg.Errors {
					fmt.Fprintln(w, e.Error())
				}
			})
			if !msg.OK {
				return usageError{fmt.Sprintf("%s has %d problem(s)", args[0], len(msg.Errors))}
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "show",
		Short: "Print the configuration in effect (--config, environment, flags), each value with its source, secrets redacted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.loadConfig(cmd, g.configPath, nil)
			if err != nil {
				return err
			}
			var b strings.Builder
			if err := c.Show(&b); err != nil {
				return err
			}
			g.out.emit(configShowMessage{"config", b.String()}, func(w io.Writer) { io.WriteString(w, b.String()) })
			return nil
		},
	})
	return cmd
}

// secretFileProblems reads what serve reads at start and the config
// package never does (it only checks that secret files can be opened): the
// token file, which must parse, and each ssh provider's key_file, which
// must be a usable private key. No secret is shown.
func secretFileProblems(c *config.Config, file string) []*config.Error {
	out := []*config.Error{} // [] in JSON when none
	if _, err := server.LoadTokens(c.Server.TokensFile); err != nil {
		out = append(out, &config.Error{File: file, Key: "server.tokens_file", Msg: err.Error()})
	}
	for _, p := range c.Providers {
		if p, ok := p.(config.SSHProvider); ok {
			if _, err := sshKey(p); err != nil {
				out = append(out, &config.Error{File: file, Key: "providers." + p.Name + ".key_file", Msg: err.Error()})
			}
		}
	}
	return out
}
