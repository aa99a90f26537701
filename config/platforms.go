package config

import "time"

// The HTTP sandbox platforms' provider types.
const (
	TypeVercel     = "vercel"
	TypeDaytona    = "daytona"
	TypeCloudflare = "cloudflare"
)

// PlatformProvider is a provider instance on an HTTP sandbox platform:
// Vercel Sandbox, Daytona, or Cloudflare sandboxes through a bridge
// Worker. The credential (Vercel's access token, Daytona's API key, the
// bridge's token) is given as a file or an environment variable name,
// never inline; Config.Secret reads it.
type PlatformProvider struct {
	Name           string
	Kind           string        // TypeVercel, TypeDaytona or TypeCloudflare
	BaseURL        string        // the API (the bridge's URL for cloudflare)
	APIKey         Secret        // api_key_file or api_key_env
	TeamID         string        // vercel
	ProjectID      string        // vercel
	OrganizationID string        // daytona
	Template       string        // vercel: runtime; daytona: snapshot
	Workspace      string        // absolute directory in the sandbox
	CacheDir       string        // local mirrors; default <state.dir>/mirrors/<name>
	Timeout        time.Duration // per control-plane request
	SandboxTimeout time.Duration // vercel: the lifetime asked for a new sandbox; 0 the platform's
}

// InstanceName implements Provider.
func (p PlatformProvider) InstanceName() string { return p.Name }

// Type implements Provider.
func (p PlatformProvider) Type() string { return p.Kind }

// platformKeys are the keys of each platform type, in Show's order.
func platformKeys(kind string) []spec {
	keys := []spec{typeKey}
	switch kind {
	case TypeVercel:
		keys = append(keys, spec{name: "base_url", kind: kURL, def: "https://vercel.com/api"})
	case TypeDaytona:
		keys = append(keys, spec{name: "base_url", kind: kURL, def: "https://app.daytona.io/api"})
	default:
		keys = append(keys, spec{name: "base_url", kind: kURL, required: true})
	}
	keys = append(keys,
		spec{name: "api_key_file", kind: kFile, secret: true, defNote: "or api_key_env"},
		spec{name: "api_key_env", kind: kEnvName, defNote: "or api_key_file"})
	switch kind {
	case TypeVercel:
		keys = append(keys,
			spec{name: "team_id", kind: kString, defNote: "the token's own scope"},
			spec{name: "project_id", kind: kString, required: true},
			spec{name: "runtime", kind: kString, defNote: "the platform's"},
			spec{name: "sandbox_timeout", kind: kDurationOff, def: "off", defNote: "the platform's"},
			spec{name: "workspace", kind: kString, def: "/vercel/sandbox/workspace"})
	case TypeDaytona:
		keys = append(keys,
			spec{name: "organization_id", kind: kString, defNote: "the key's own organization"},
			spec{name: "snapshot", kind: kString, defNote: "the platform's"},
			spec{name: "workspace", kind: kString, def: "/home/daytona/workspace"})
	default:
		keys = append(keys, spec{name: "workspace", kind: kString, def: "/workspace"})
	}
	return append(keys,
		spec{name: "cache_dir", kind: kString, defNote: "<state.dir>/mirrors/<name>"},
		spec{name: "timeout", kind: kDuration, def: "30s"})
}

func (d *decoder) platform(c *Config, r *reader, name, kind string) PlatformProvider {
	p := PlatformProvider{Name: name, Kind: kind, BaseURL: r.str("base_url"), APIKey: d.secret(c, r, "api_key")}
	switch kind {
	case TypeVercel:
		p.TeamID, p.ProjectID, p.Template = r.str("team_id"), r.str("project_id"), r.str("runtime")
		p.SandboxTimeout = r.dur("sandbox_timeout")
	case TypeDaytona:
		p.OrganizationID, p.Template = r.str("organization_id"), r.str("snapshot")
	}
	p.Workspace, p.CacheDir, p.Timeout = r.str("workspace"), r.str("cache_dir"), r.dur("timeout")
	d.sandboxPaths(c, r, name, &p.Workspace, &p.CacheDir)
	return p
}
