package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"lifeboat/config"
	"lifeboat/server"
)

// configKeys maps the global flags onto the config keys they override.
var configKeys = map[string]string{
	"repo":          "repository.location",
	"password-file": "repository.password_file",
	"cache-dir":     "repository.cache_dir",
	"key-hint":      "repository.key_hint",
	"state-dir":     "state.dir",
}

// configSets returns the KEY=VALUE overrides of the flags given on this
// command line (flag > environment > file > default), then --set.
func (g *globalOptions) configSets(cmd *cobra.Command, extra map[string]string) []string {
	var sets []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if key, ok := configKeys[f.Name]; ok {
			sets = append(sets, key+"="+f.Value.String())
		}
		if f.Name == "local-root" {
			sets = append(sets, "providers.local.type=local", "providers.local.root="+f.Value.String())
		}
	})
	for flag, key := range extra {
		if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
			sets = append(sets, key+"="+f.Value.String())
		}
	}
	return append(sets, g.sets...)
}

// loadConfig loads the config file (it may be "") with the environment
// and the flags given. Errors are usage errors (exit code 2) that name
// file, line and key.
func (g *globalOptions) loadConfig(cmd *cobra.Command, path string, extra map[string]string) (*config.Config, error) {
	c, err := config.Load(config.Options{Path: path, LookupEnv: os.LookupEnv, Sets: g.configSets(cmd, extra)})
	var errs config.Errors
	if errors.As(err, &errs) {
		return nil, usageError{"the configuration has problems (fix them, then run `lifeboat config check`):\n  " + strings.ReplaceAll(errs.Error(), "\n", "\n  ")}
	}
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return c, nil
}

// applyConfig loads --config for every command but `config` and `serve`
// (which load it themselves): the repository, password, cache and state
// store then come from it, unless flags override them.
func (g *globalOptions) applyConfig(cmd *cobra.Command) error {
	if g.configPath == "" || cmd.Name() == "serve" || (cmd.Parent() != nil && cmd.Parent().Name() == "config") {
		return nil
	}
	c, err := g.loadConfig(cmd, g.configPath, nil)
	if err != nil {
		return err
	}
	g.cfg = c
	g.repo, g.cacheDir, g.keyHint, g.stateDir = c.Repository.Location, c.Repository.CacheDir, c.Repository.KeyHint, c.State.Dir
	g.passwordFile = c.Repository.PasswordFile
	if g.serverURL == "" {
		g.serverURL = c.ServerURL()
	}
	if g.tokenFile == "" {
		g.tokenFile = c.Server.TokenFile
	}
	return nil
}

// client returns a client of the running server when the command is
// pointed at one (--server, LIFEBOAT_SERVER, or --config), else nil.
func (g *globalOptions) client() (*server.Client, error) {
	if g.serverURL == "" {
		return nil, nil
	}
	if g.tokenFile == "" {
		return nil, usageError{fmt.Sprintf("talking to the server at %s needs a token: pass --token-file FILE (or set LIFEBOAT_TOKEN_FILE, or [server] token_file in the config)", g.serverURL)}
	}
	b, err := os.ReadFile(g.tokenFile)
	if err != nil {
		return nil, usageError{fmt.Sprintf("reading the token file: %v", err)}
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, usageError{fmt.Sprintf("token file %s is empty", g.tokenFile)}
	}
	return &server.Client{BaseURL: g.serverURL, Token: tok}, nil
}

// needClient is client for commands that only work through a server.
func (g *globalOptions) needClient(what string) (*server.Client, error) {
	c, err := g.client()
	if err == nil && c == nil {
		err = usageError{what + " needs a running `lifeboat serve`: pass --server URL and --token-file FILE, or --config FILE"}
	}
	return c, err
}
