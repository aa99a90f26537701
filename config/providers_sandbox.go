package config

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Secret says where a provider's API key or token is: the content of File
// (without its final newline) or the value of the environment variable
// Env; exactly one is set. Key names the pair for messages ("api_key" for
// api_key_file and api_key_env); callers add the provider's name.
type Secret struct {
	File string
	Env  string
	Key  string
}

// Secret reads s. Errors name the file or the variable, never the value.
func (c *Config) Secret(s Secret) (string, error) {
	if s.File != "" {
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("reading %s_file: %w", s.Key, err)
		}
		b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(b) == 0 {
			return "", fmt.Errorf("%s_file %s is empty", s.Key, s.File)
		}
		return string(b), nil
	}
	v, ok := c.lookup(s.Env)
	switch {
	case s.Env == "":
		return "", fmt.Errorf("no %s: set %s_file or %s_env", s.Key, s.Key, s.Key)
	case !ok:
		return "", fmt.Errorf("the environment variable %s (%s_env) is not set", s.Env, s.Key)
	case v == "":
		return "", fmt.Errorf("the environment variable %s (%s_env) is empty", s.Env, s.Key)
	}
	return v, nil
}

// E2BProvider is an E2B account (providers/e2b).
type E2BProvider struct {
	Name           string
	APIKey         Secret
	BaseURL        string
	SandboxURL     string // "" is https://49983-<sandbox>.<domain>
	Domain         string
	Template       string
	SandboxTimeout time.Duration
	User           string
	Workspace      string // absolute path in the sandbox
	Timeout        time.Duration
	Transfer       time.Duration
	Ready          time.Duration
	CacheDir       string
}

// InstanceName implements Provider.
func (p E2BProvider) InstanceName() string { return p.Name }

// Type implements Provider.
func (p E2BProvider) Type() string { return TypeE2B }

// ManagedAgentsProvider is an account on a Managed Agents sessions API
// with checkpoints (providers/managedagents).
type ManagedAgentsProvider struct {
	Name              string
	Token             Secret
	BaseURL           string
	Timeout           time.Duration
	CheckpointTimeout time.Duration
	Label             string
}

// InstanceName implements Provider.
func (p ManagedAgentsProvider) InstanceName() string { return p.Name }

// Type implements Provider.
func (p ManagedAgentsProvider) Type() string { return TypeManagedAgents }

var e2bKeys = []spec{
	typeKey,
	{name: "api_key_file", kind: kFile, secret: true, defNote: "or api_key_env"},
	{name: "api_key_env", kind: kEnvName, defNote: "or api_key_file"},
	{name: "base_url", kind: kURL, def: "https://api.e2b.app"},
	{name: "sandbox_url", kind: kURL, defNote: "https://49983-<sandbox>.<domain>"},
	{name: "domain", kind: kString, def: "e2b.app"},
	{name: "template", kind: kString, def: "base"},
	{name: "sandbox_timeout", kind: kDuration, def: "5m"},
	{name: "user", kind: kString, def: "user"},
	{name: "workspace", kind: kString, def: "/home/user/workspace"},
	{name: "timeout", kind: kDuration, def: "30s"},
	{name: "transfer_timeout", kind: kDuration, def: "30m"},
	{name: "ready_timeout", kind: kDuration, def: "1m"},
	{name: "cache_dir", kind: kString, defNote: "<state.dir>/mirrors/<name>"},
}

var managedAgentsKeys = []spec{
	typeKey,
	{name: "token_file", kind: kFile, secret: true, defNote: "or token_env"},
	{name: "token_env", kind: kEnvName, defNote: "or token_file"},
	{name: "base_url", kind: kURL, def: "https://api.digitalocean.com"},
	{name: "timeout", kind: kDuration, def: "30s"},
	{name: "checkpoint_timeout", kind: kDuration, def: "10m"},
	{name: "label", kind: kString, def: "lifeboat"},
}

// secret reads the pair <key>_file / <key>_env of r: exactly one.
func (d *decoder) secret(c *Config, r *reader, key string) Secret {
	s := Secret{File: r.str(key + "_file"), Env: r.str(key + "_env"), Key: key}
	fk, ek := key+"_file", key+"_env"
	switch {
	case r.given(fk) && r.given(ek):
		d.fail(r.src(ek), join(r.path, ek), "%s (%s) and %s are both set: give exactly one", fk, r.src(fk), ek)
	case !r.given(fk) && !r.given(ek):
		d.fail(d.tableSource(r.path), r.path, "no %s: set %s (a file holding it) or %s (the name of an environment variable holding it)", key, fk, ek)
	}
	r.noteEnv(c, ek, s.Env)
	return s
}

func (d *decoder) e2b(c *Config, r *reader, name string) E2BProvider {
	p := E2BProvider{
		Name:           name,
		BaseURL:        r.str("base_url"),
		SandboxURL:     r.str("sandbox_url"),
		Domain:         r.str("domain"),
		Template:       r.str("template"),
		SandboxTimeout: r.dur("sandbox_timeout"),
		User:           r.str("user"),
		Workspace:      r.str("workspace"),
		Timeout:        r.dur("timeout"),
		Transfer:       r.dur("transfer_timeout"),
		Ready:          r.dur("ready_timeout"),
		CacheDir:       r.str("cache_dir"),
	}
	p.APIKey = d.secret(c, r, "api_key")
	d.sandboxPaths(c, r, name, &p.Workspace, &p.CacheDir)
	return p
}

func (d *decoder) managedAgents(c *Config, r *reader, name string) ManagedAgentsProvider {
	p := ManagedAgentsProvider{
		Name:              name,
		BaseURL:           r.str("base_url"),
		Timeout:           r.dur("timeout"),
		CheckpointTimeout: r.dur("checkpoint_timeout"),
		Label:             r.str("label"),
	}
	p.Token = d.secret(c, r, "token")
	return p
}

// sandboxPaths checks and completes the workspace and cache_dir keys of a
// sandbox platform's provider: the workspace is an absolute directory in
// the sandbox other than / (cleaned) whose last name does not start with
// "-"; cache_dir defaults to
// <state.dir>/mirrors/<name>.
func (d *decoder) sandboxPaths(c *Config, r *reader, name string, workspace, cacheDir *string) {
	if w := *workspace; w != "" && (!path.IsAbs(w) || path.Clean(w) == "/") {
		d.fail(r.src("workspace"), join(r.path, "workspace"), "workspace %q must be an absolute directory in the sandbox other than /", w)
	} else if strings.HasPrefix(path.Base(w), "-") {
		d.fail(r.src("workspace"), join(r.path, "workspace"), "workspace %q: its last name starts with -, which the sandbox's find and mv would read as an option; rename it", w)
	}
	if *workspace != "" {
		*workspace = path.Clean(*workspace)
	}
	if *cacheDir == "" && c.State.Dir != "" {
		*cacheDir = filepath.Join(c.State.Dir, "mirrors", name)
		r.line("cache_dir").val = quote(*cacheDir)
	}
}
