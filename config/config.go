package config

import (
	"log/slog"
	"regexp"
	"time"

	"lifeboat/prune"
)

// Config is the checked, effective configuration of `lifeboat serve`,
// with every default filled in. Make one with Load.
type Config struct {
	Repository Repository
	State      State
	Server     Server
	Log        Log
	Lifecycle  Lifecycle
	Hooks      []Hook        // [[quiesce.hook]], in file order
	Retention  *prune.Policy // the default policy; nil when [retention] is absent (keep everything)
	// RetentionEvery is [retention] every: serve applies retention to
	// every workspace on this schedule instead of after each capture; 0:
	// after each capture.
	RetentionEvery time.Duration
	Prune          Prune               // the prune schedule
	Providers      []Provider          // LocalProvider or SSHProvider, sorted by name
	Workspaces     []WorkspaceOverride // sorted by ID

	file string
	env  func(string) (string, bool)
	show []*showTable
}

// Repository is [repository]. Exactly one of PasswordFile and PasswordEnv
// is set; Password reads the password from it.
type Repository struct {
	Location     string
	PasswordFile string // a file holding the password
	PasswordEnv  string // the name of an environment variable holding it
	CacheDir     string // "" for the default (the user cache dir)
	KeyHint      string
	S3           S3 // the s3_* keys, used when Location is an s3: location
}

// S3 holds the settings of an S3 repository. At most one of SecretFile
// and SecretEnv is set; S3SecretAccessKey reads the secret from it.
type S3 struct {
	AccessKeyID string
	SecretFile  string // a file holding the secret access key
	SecretEnv   string // the name of an environment variable holding it
	Region      string // "" lets the client ask the server
	Addressing  string // "auto", "path" or "virtual-host"
	TempDir     string // where packs wait for their upload; "" is the system temp dir
}

// State is [state]. URL, when set, names a PostgreSQL state store that
// several servers share (Dir still holds this server's local files); its
// password comes from PasswordFile or PasswordEnv, never from the URL.
type State struct {
	Dir          string // the state directory; the embedded store when URL is ""
	URL          string // postgres:// or postgresql://, without a password
	PasswordFile string
	PasswordEnv  string
	// Lease is how long a server's claim on a recovery operation it
	// drives lasts without renewal on a shared (PostgreSQL) store.
	Lease time.Duration
}

// Server is [server].
type Server struct {
	Listen     string // host:port
	TokensFile string // the token file (hashes) the server accepts
	TLSCert    string // with TLSKey, or both empty
	TLSKey     string
	URL        string // how CLI clients reach the server; derived from Listen unless set
	TokenFile  string // the file holding the bearer token CLI clients send; "" when unset
	// ReadTimeout bounds reading a request's headers (at most 10 s of it)
	// and then its body; WriteTimeout writing an answer (the event stream:
	// each event); IdleTimeout a keep-alive connection between requests.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ShutdownGrace is how long a shutdown lets the requests and captures
	// in progress finish before it cancels them; 0 cancels them at once.
	ShutdownGrace time.Duration
}

// TLS reports whether the server serves HTTPS.
func (s Server) TLS() bool { return s.TLSCert != "" }

// Log is the file's [log] table (format and level).
type Log struct {
	Format string // "text" or "json"
	Level  slog.Level
}

// Lifecycle is [lifecycle]: the server-wide intervals.
type Lifecycle struct {
	ParkInterval     time.Duration
	PeriodicInterval time.Duration // 0: periodic captures are off
	NativeInterval   time.Duration // ParkInterval unless set
	CheckInterval    time.Duration
	MaxParallel      int
	MaxChecks        int // workspaces checked at once (periodic rounds, health checks)
	QuiesceTimeout   time.Duration
	// Redact are regular expressions whose matches are replaced with
	// [REDACTED] in the commands, directories and output tails of the
	// process records kept with checkpoints.
	Redact []*regexp.Regexp
}

// Hook is one [[quiesce.hook]]: commands run inside the sandbox, through
// its provider, to pause and resume a writer around a capture.
type Hook struct {
	Name       string
	Pause      []string // argv
	Resume     []string // argv
	Timeout    time.Duration
	Workspaces []string // nil: every workspace
}

// AppliesTo reports whether the hook runs for workspace id.
func (h Hook) AppliesTo(id string) bool {
	if h.Workspaces == nil {
		return true
	}
	for _, w := range h.Workspaces {
		if w == id {
			return true
		}
	}
	return false
}

// Prune is [prune].
type Prune struct {
	Every     time.Duration // 0: no schedule
	MaxUnused float64       // a fraction, as prune.Options.MaxUnused takes it
	// DeleteAfter is the two-phase prune's margin between condemning a
	// pack and deleting it (prune.Options.DeleteAfter).
	DeleteAfter time.Duration
}

// WorkspaceOverride is [workspaces.ID]: one workspace's own intervals;
// zero means the [lifecycle] value.
type WorkspaceOverride struct {
	ID               string
	ParkInterval     time.Duration
	PeriodicInterval time.Duration
}

// Options say where Load finds the configuration.
type Options struct {
	// Path is the config file; "" runs on the environment and Sets alone.
	Path string
	// LookupEnv reads the environment (os.LookupEnv in production); nil
	// is an empty environment.
	LookupEnv func(string) (string, bool)
	// Sets are KEY=VALUE overrides from flags, applied in order: KEY is a
	// dotted key path (server.listen, providers.box1.port).
	Sets []string
}

// Load reads the file, then the environment, then Sets (each replacing
// the one before: flag > environment > file > default), checks every key
// and returns the typed configuration. On any problem it returns Errors
// with every problem found.
func Load(opts Options) (*Config, error) {
	d := &decoder{file: opts.Path, tables: map[string]source{}, used: map[string]bool{}}
	var file []*value
	if opts.Path != "" {
		f, errs := readFile(opts.Path)
		if f == nil {
			return nil, errs
		}
		d.errs = append(d.errs, errs...)
		file, d.tables = f.vals, f.tables
	}
	flags, errs := flagLayer(opts.Sets)
	d.errs = append(d.errs, errs...)
	d.vals, d.replaced, d.shadowed = merge(file, envLayer(opts.LookupEnv), flags)

	c := &Config{file: opts.Path, env: opts.LookupEnv}
	d.repository(c)
	d.state(c)
	d.server(c)
	d.log(c)
	d.lifecycle(c)
	d.hooks(c)
	d.retention(c)
	d.prune(c)
	d.providers(c)
	d.workspaces(c)
	d.unknown()
	if len(d.errs) > 0 {
		d.errs.sort(opts.Path)
		return nil, d.errs
	}
	c.show = d.show
	return c, nil
}

// ServerURL is how CLI clients reach the server: [server] url, or
// http:// (https:// with TLS) and the listen address, where an
// unspecified host (0.0.0.0, ::, empty) becomes the loopback address. It
// has no trailing slash.
func (c *Config) ServerURL() string { return c.Server.URL }

// File is the config file Load read, or "".
func (c *Config) File() string { return c.file }
