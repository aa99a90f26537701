package config

import "strings"

// kind is how a key's value is parsed and checked.
type kind int

const (
	kString      kind = iota
	kFile             // a path to a file that must exist and be readable; never read
	kEnvName          // the name of an environment variable
	kEnum             // one of spec.enum
	kListen           // host:port
	kURL              // http:// or https:// URL
	kInt              // integer in [spec.min, spec.max]
	kDuration         // Go duration > 0
	kDurationOff      // Go duration >= 0; "off" is 0
	kDurationAny      // Go duration, checked by prune.Policy.Validate
	kCount            // integer, checked by prune.Policy.Validate
	kPercent          // "5%", "5" or "unlimited"
	kList             // array of strings
	kArgv             // non-empty array of non-empty strings
)

// spec describes one key.
type spec struct {
	name     string
	kind     kind
	def      string // default, as written in the file; "" is none
	defNote  string // words Show adds to "# default"
	required bool
	secret   bool     // kFile holding a secret
	min, max int      // kInt; max 0 means no bound
	enum     []string // kEnum
	aliases  []string // older environment variable names the CLI documents
}

func (s *spec) list() bool { return s.kind == kList || s.kind == kArgv }

// section is a fixed table of the file.
type section struct {
	name string
	keys []spec
}

func (s *section) spec(name string) *spec { return findSpec(s.keys, name) }

func findSpec(keys []spec, name string) *spec {
	for i := range keys {
		if keys[i].name == name {
			return &keys[i]
		}
	}
	return nil
}

func keyNames(keys []spec) string {
	names := make([]string, len(keys))
	for i := range keys {
		names[i] = keys[i].name
	}
	return strings.Join(names, ", ")
}

// The fixed sections, in the order Show prints them. [quiesce], [providers]
// and [workspaces] hold named or repeated tables and are described below.
var fixedSections = []section{
	{"repository", []spec{
		{name: "location", kind: kString, required: true, aliases: []string{"LIFEBOAT_REPO"}},
		{name: "password_file", kind: kFile, secret: true, aliases: []string{"LIFEBOAT_PASSWORD_FILE"}},
		{name: "password_env", kind: kEnvName},
		{name: "cache_dir", kind: kString, defNote: "the user cache dir", aliases: []string{"LIFEBOAT_CACHE_DIR"}},
		{name: "key_hint", kind: kString, aliases: []string{"LIFEBOAT_KEY_HINT"}},
		{name: "s3_access_key_id", kind: kString, defNote: "none; an s3: location needs one", aliases: []string{"AWS_ACCESS_KEY_ID"}},
		{name: "s3_secret_access_key_file", kind: kFile, secret: true},
		{name: "s3_secret_access_key_env", kind: kEnvName, def: "AWS_SECRET_ACCESS_KEY", defNote: "unless s3_secret_access_key_file is set"},
		{name: "s3_region", kind: kString, defNote: "asked from the server", aliases: []string{"AWS_DEFAULT_REGION", "AWS_REGION"}},
		{name: "s3_addressing", kind: kEnum, def: "auto", enum: []string{"auto", "path", "virtual-host"}},
		{name: "s3_temp_dir", kind: kString, defNote: "the system temp dir"},
	}},
	{"state", []spec{
		{name: "dir", kind: kString, required: true},
		{name: "url", kind: kString, defNote: "the embedded store <dir>/state.db"},
		{name: "password_file", kind: kFile, secret: true},
		{name: "password_env", kind: kEnvName},
		{name: "lease", kind: kDuration, def: "30s"},
	}},
	{"server", []spec{
		{name: "listen", kind: kListen, def: "127.0.0.1:8080"},
		{name: "tokens_file", kind: kFile, required: true},
		{name: "tls_cert", kind: kFile},
		{name: "tls_key", kind: kFile, secret: true},
		{name: "url", kind: kURL, defNote: "from listen"},
		{name: "token_file", kind: kFile, secret: true},
		{name: "read_timeout", kind: kDuration, def: "30s"},
		{name: "write_timeout", kind: kDuration, def: "30s"},
		{name: "idle_timeout", kind: kDuration, def: "1m"},
		{name: "shutdown_grace", kind: kDurationOff, def: "off"},
	}},
	{"log", []spec{
		{name: "format", kind: kEnum, def: "text", enum: []string{"text", "json"}},
		{name: "level", kind: kEnum, def: "info", enum: []string{"debug", "info", "warn", "error"}},
	}},
	{"lifecycle", []spec{
		{name: "park_interval", kind: kDuration, def: "5m"},
		{name: "periodic_interval", kind: kDurationOff, def: "15m"},
		{name: "native_interval", kind: kDuration, defNote: "park_interval"},
		{name: "check_interval", kind: kDuration, def: "1m"},
		{name: "max_parallel", kind: kInt, def: "2", min: 1},
		{name: "max_checks", kind: kInt, def: "8", min: 1},
		{name: "quiesce_timeout", kind: kDuration, def: "30s"},
		{name: "redact", kind: kList, defNote: "nothing is redacted"},
	}},
	{"retention", []spec{
		{name: "keep_last", kind: kCount, def: "0"},
		{name: "keep_within", kind: kDurationAny, def: "0s"},
		{name: "keep_hourly", kind: kCount, def: "0"},
		{name: "keep_daily", kind: kCount, def: "0"},
		{name: "keep_weekly", kind: kCount, def: "0"},
		{name: "keep_monthly", kind: kCount, def: "0"},
		{name: "keep_tags", kind: kList},
		{name: "every", kind: kDurationOff, def: "off"},
	}},
	{"prune", []spec{
		{name: "every", kind: kDurationOff, def: "off"},
		{name: "max_unused", kind: kPercent, def: "5%"},
		{name: "delete_after", kind: kDuration, def: "24h"},
	}},
}

func fixedSection(name string) *section {
	for i := range fixedSections {
		if fixedSections[i].name == name {
			return &fixedSections[i]
		}
	}
	return nil
}

// Every top-level table the file may have.
var topLevel = []string{"repository", "state", "server", "log", "lifecycle", "quiesce", "retention", "prune", "providers", "workspaces"}

// [[quiesce.hook]] tables.
var hookKeys = []spec{
	{name: "name", kind: kString, required: true},
	{name: "pause", kind: kArgv, required: true},
	{name: "resume", kind: kArgv, required: true},
	{name: "timeout", kind: kDuration, def: "30s"},
	{name: "workspaces", kind: kList, defNote: "every workspace"},
}

// Provider types and their keys ([providers.NAME]); "type" comes first.
const (
	TypeLocal         = "local"
	TypeSSH           = "ssh"
	TypeE2B           = "e2b"
	TypeManagedAgents = "managed-agents"
)

var providerTypes = []string{TypeLocal, TypeSSH, TypeVercel, TypeDaytona, TypeCloudflare, TypeDocker, TypeE2B, TypeManagedAgents}

var typeKey = spec{name: "type", kind: kString, required: true}

var localKeys = []spec{
	typeKey,
	{name: "root", kind: kString, required: true},
}

var sshKeys = []spec{
	typeKey,
	{name: "host", kind: kString, required: true},
	{name: "port", kind: kInt, def: "22", min: 1, max: 65535},
	{name: "user", kind: kString, required: true},
	{name: "key_file", kind: kFile, secret: true, required: true},
	{name: "known_hosts", kind: kFile, required: true},
	{name: "root", kind: kString, required: true},
	{name: "cache_dir", kind: kString, defNote: "<state.dir>/mirrors/<name>"},
}

// [workspaces.ID]: the per-workspace overrides of [lifecycle].
var workspaceKeys = []spec{
	{name: "park_interval", kind: kDuration},
	{name: "periodic_interval", kind: kDuration},
}

// envName is the environment variable of a fixed section's key.
func envName(section, key string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return "LIFEBOAT_" + strings.ToUpper(r.Replace(section)) + "_" + strings.ToUpper(r.Replace(key))
}

// EnvLocalRoot defines a provider instance named "local" of type local
// with this root (the CLI's --local-root).
const EnvLocalRoot = "LIFEBOAT_LOCAL_ROOT"

// LocalRootProvider is the name of the instance EnvLocalRoot defines.
const LocalRootProvider = "local"
