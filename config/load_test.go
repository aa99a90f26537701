package config

import (
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"lifeboat/prune"
)

const full = `# every key
[repository]
location = "{{dir}}/repo"
password_env = "LB_PW"
cache_dir = "{{dir}}/cache"
key_hint = "ab12"

[state]
dir = "{{dir}}/state"
lease = "45s"

[server]
listen = "0.0.0.0:8443"
tokens_file = "{{dir}}/tokens"
tls_cert = "{{dir}}/tls.crt"
tls_key = "{{dir}}/tls.key"
url = "https://lifeboat.internal:8443/"
token_file = "{{dir}}/client.tok"
read_timeout = "20s"
write_timeout = "40s"
idle_timeout = "90s"

[log]
format = "json"
level = "debug"

[lifecycle]
park_interval = "10m"
periodic_interval = "off"
native_interval = "1h"
check_interval = "2m"
max_parallel = 4
max_checks = 16
quiesce_timeout = "45s"

[[quiesce.hook]]
name = "agent"
pause = ["pkill", "-STOP", "-f", "agent"]
resume = ["pkill", "-CONT", "-f", "agent"]
timeout = "10s"
workspaces = ["bot1"]

[[quiesce.hook]]
name = "db"
pause = ["db-ctl", "pause"]
resume = ["db-ctl", "resume"]

[retention]
keep_last = 10
keep_within = "72h"
keep_hourly = 1
keep_daily = 7
keep_weekly = 4
keep_monthly = 2
keep_tags = ["release"]
every = "1m"

[prune]
every = "24h"
max_unused = "10%"

[providers.local-a]
type = "local"
root = "/srv/sandboxes"

[providers.box1]
type = "ssh"
host = "10.0.0.5"
port = 2200
user = "lifeboat"
key_file = "{{dir}}/id_ed25519"
known_hosts = "{{dir}}/known_hosts"
root = "/home/lifeboat/workspaces/"
cache_dir = "{{dir}}/mirror"

[workspaces.bot1]
park_interval = "1m"
periodic_interval = "5m"

[workspaces."bot.2"]
periodic_interval = "30m"
`

func TestLoadFull(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.mustLoad(f.write("lifeboat.toml", full), nil)
	d := f.dir
	want := &Config{
		Repository: Repository{Location: d + "/repo", PasswordEnv: "LB_PW", CacheDir: d + "/cache", KeyHint: "ab12", S3: s3Defaults},
		State:      State{Dir: d + "/state", Lease: 45 * time.Second},
		Server: Server{Listen: "0.0.0.0:8443", TokensFile: d + "/tokens", TLSCert: d + "/tls.crt", TLSKey: d + "/tls.key",
			URL: "https://lifeboat.internal:8443", TokenFile: d + "/client.tok",
			ReadTimeout: 20 * time.Second, WriteTimeout: 40 * time.Second, IdleTimeout: 90 * time.Second},
		Log: Log{Format: "json", Level: slog.LevelDebug},
		Lifecycle: Lifecycle{ParkInterval: 10 * time.Minute, PeriodicInterval: 0, NativeInterval: time.Hour,
			CheckInterval: 2 * time.Minute, MaxParallel: 4, MaxChecks: 16, QuiesceTimeout: 45 * time.Second},
		Hooks: []Hook{
			{Name: "agent", Pause: []string{"pkill", "-STOP", "-f", "agent"}, Resume: []string{"pkill", "-CONT", "-f", "agent"},
				Timeout: 10 * time.Second, Workspaces: []string{"bot1"}},
			{Name: "db", Pause: []string{"db-ctl", "pause"}, Resume: []string{"db-ctl", "resume"}, Timeout: 30 * time.Second},
		},
		Retention:      &prune.Policy{Last: 10, Within: 72 * time.Hour, Hourly: 1, Daily: 7, Weekly: 4, Monthly: 2, Tags: []string{"release"}},
		RetentionEvery: time.Minute,
		Prune:          Prune{Every: 24 * time.Hour, MaxUnused: 0.1, DeleteAfter: 24 * time.Hour},
		Providers: []Provider{
			SSHProvider{Name: "box1", Host: "10.0.0.5", Port: 2200, User: "lifeboat", KeyFile: d + "/id_ed25519",
				KnownHosts: d + "/known_hosts", Root: "/home/lifeboat/workspaces", CacheDir: d + "/mirror"},
			LocalProvider{Name: "local-a", Root: "/srv/sandboxes"},
		},
		Workspaces: []WorkspaceOverride{
			{ID: "bot.2", PeriodicInterval: 30 * time.Minute},
			{ID: "bot1", ParkInterval: time.Minute, PeriodicInterval: 5 * time.Minute},
		},
	}
	assertConfig(t, c, want)
	if got := c.ServerURL(); got != "https://lifeboat.internal:8443" {
		t.Errorf("ServerURL = %q", got)
	}
	if !c.Hooks[0].AppliesTo("bot1") || c.Hooks[0].AppliesTo("bot2") || !c.Hooks[1].AppliesTo("anything") {
		t.Error("AppliesTo: the agent hook is for bot1 only, the db hook for every workspace")
	}
	if got := c.Providers[0].(SSHProvider).Addr(); got != "10.0.0.5:2200" {
		t.Errorf("Addr = %q", got)
	}
}

// assertConfig compares the exported fields.
func assertConfig(t *testing.T, got, want *Config) {
	t.Helper()
	g := *got
	g.file, g.env, g.show = "", nil, nil
	w := *want
	w.file, w.env, w.show = "", nil, nil
	if !reflect.DeepEqual(&g, &w) {
		t.Errorf("config:\n got %+v\nwant %+v", g, w)
	}
}

// s3Defaults are the [repository] s3_* values when none is set.
var s3Defaults = S3{SecretEnv: "AWS_SECRET_ACCESS_KEY", Addressing: "auto"}

func TestDefaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.mustLoad(f.write("lifeboat.toml", minimal+`
[providers.box1]
type = "ssh"
host = "box1.example"
user = "lb"
key_file = "{{dir}}/id_ed25519"
known_hosts = "{{dir}}/known_hosts"
root = "/w"
`), nil)
	d := f.dir
	want := &Config{
		Repository: Repository{Location: d + "/repo", PasswordFile: d + "/repo.pw", S3: s3Defaults},
		State:      State{Dir: d + "/state", Lease: 30 * time.Second},
		Server: Server{Listen: "127.0.0.1:8080", TokensFile: d + "/tokens", URL: "http://127.0.0.1:8080",
			ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute},
		Log: Log{Format: "text", Level: slog.LevelInfo},
		Lifecycle: Lifecycle{ParkInterval: 5 * time.Minute, PeriodicInterval: 15 * time.Minute, NativeInterval: 5 * time.Minute,
			CheckInterval: time.Minute, MaxParallel: 2, MaxChecks: 8, QuiesceTimeout: 30 * time.Second},
		Prune: Prune{MaxUnused: 0.05, DeleteAfter: 24 * time.Hour},
		Providers: []Provider{SSHProvider{Name: "box1", Host: "box1.example", Port: 22, User: "lb", KeyFile: d + "/id_ed25519",
			KnownHosts: d + "/known_hosts", Root: "/w", CacheDir: filepath.Join(d, "state", "mirrors", "box1")}},
	}
	assertConfig(t, c, want)
	if c.Retention != nil {
		t.Errorf("Retention = %v, want nil (absent: keep everything)", c.Retention)
	}
}

// TestPrecedence: flag > env > file > default, key by key.
func TestPrecedence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	file := f.write("lifeboat.toml", minimal+`listen = "127.0.0.1:1000"

[lifecycle]
park_interval = "1m"

[providers.box1]
type = "ssh"
host = "h"
port = 2201
user = "u"
key_file = "{{dir}}/id_ed25519"
known_hosts = "{{dir}}/known_hosts"
root = "/w"
`)
	get := map[string]func(*Config) any{
		"listen":   func(c *Config) any { return c.Server.Listen },
		"park":     func(c *Config) any { return c.Lifecycle.ParkInterval },
		"port":     func(c *Config) any { return c.Providers[0].(SSHProvider).Port },
		"location": func(c *Config) any { return c.Repository.Location },
		"level":    func(c *Config) any { return c.Log.Level },
		"state":    func(c *Config) any { return c.State.Dir },
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		sets []string
		key  string
		want any
	}{
		{"file", nil, nil, "listen", "127.0.0.1:1000"},
		{"env over file", map[string]string{"LIFEBOAT_SERVER_LISTEN": "127.0.0.1:2000"}, nil, "listen", "127.0.0.1:2000"},
		{"flag over env", map[string]string{"LIFEBOAT_SERVER_LISTEN": "127.0.0.1:2000"}, []string{"server.listen=127.0.0.1:3000"}, "listen", "127.0.0.1:3000"},
		{"empty env is unset", map[string]string{"LIFEBOAT_SERVER_LISTEN": ""}, nil, "listen", "127.0.0.1:1000"},
		{"empty flag resets to default", nil, []string{"server.listen="}, "listen", "127.0.0.1:8080"},
		{"later flag wins", nil, []string{"server.listen=127.0.0.1:3000", "server.listen=127.0.0.1:4000"}, "listen", "127.0.0.1:4000"},
		{"duration file", nil, nil, "park", time.Minute},
		{"duration env", map[string]string{"LIFEBOAT_LIFECYCLE_PARK_INTERVAL": "2m"}, nil, "park", 2 * time.Minute},
		{"duration flag", map[string]string{"LIFEBOAT_LIFECYCLE_PARK_INTERVAL": "2m"}, []string{"lifecycle.park_interval=3m"}, "park", 3 * time.Minute},
		{"provider key file", nil, nil, "port", 2201},
		{"provider key flag", nil, []string{"providers.box1.port=2222"}, "port", 2222},
		{"alias env", map[string]string{"LIFEBOAT_REPO": "/from/alias"}, nil, "location", "/from/alias"},
		{"full env name over alias", map[string]string{"LIFEBOAT_REPO": "/from/alias", "LIFEBOAT_REPOSITORY_LOCATION": "/from/full"}, nil, "location", "/from/full"},
		{"flag over alias", map[string]string{"LIFEBOAT_REPO": "/from/alias"}, []string{"repository.location=/from/flag"}, "location", "/from/flag"},
		{"default", nil, nil, "level", slog.LevelInfo},
		{"env over default", map[string]string{"LIFEBOAT_LOG_LEVEL": "warn"}, nil, "level", slog.LevelWarn},
		{"state dir env", map[string]string{"LIFEBOAT_STATE_DIR": "/st"}, nil, "state", "/st"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.mustLoad(file, tc.env, tc.sets...)
			if got := get[tc.key](c); got != tc.want {
				t.Errorf("%s = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

// TestNoFile: serve may run on the environment and flags alone.
func TestNoFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.mustLoad("", map[string]string{
		"LIFEBOAT_REPO":          "/repo",
		"LIFEBOAT_PASSWORD_FILE": f.dir + "/repo.pw",
		"LIFEBOAT_STATE_DIR":     "/state",
		"LIFEBOAT_LOCAL_ROOT":    "/srv/ws",
	}, "server.tokens_file={{dir}}/tokens", "providers.two.type=local", "providers.two.root=/srv/two", "workspaces.w.1.park_interval=7m")
	want := []Provider{LocalProvider{Name: "local", Root: "/srv/ws"}, LocalProvider{Name: "two", Root: "/srv/two"}}
	if !reflect.DeepEqual(c.Providers, want) {
		t.Errorf("Providers = %+v, want %+v", c.Providers, want)
	}
	if len(c.Workspaces) != 1 || c.Workspaces[0] != (WorkspaceOverride{ID: "w.1", ParkInterval: 7 * time.Minute}) {
		t.Errorf("Workspaces = %+v", c.Workspaces)
	}
	if c.File() != "" || c.Repository.Location != "/repo" || c.State.Dir != "/state" {
		t.Errorf("config: %+v", c)
	}
}

// TestPasswordSourceReplaced: password_file and password_env are one
// choice; a higher layer naming one replaces the other.
func TestPasswordSourceReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := f.write("lifeboat.toml", strings.Replace(minimal, `password_file = "{{dir}}/repo.pw"`, `password_env = "LB_PW"`, 1))
	c := f.mustLoad(path, nil, "repository.password_file={{dir}}/repo.pw")
	if c.Repository.PasswordFile != f.dir+"/repo.pw" || c.Repository.PasswordEnv != "" {
		t.Errorf("Repository = %+v", c.Repository)
	}
	var b strings.Builder
	if err := c.Show(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "not used: password_file is set by flag (this was "+path+":3)") {
		t.Errorf("Show does not say password_env was replaced:\n%s", b.String())
	}
	c = f.mustLoad(path, map[string]string{"LB_PW": "x"})
	if c.Repository.PasswordEnv != "LB_PW" || c.Repository.PasswordFile != "" {
		t.Errorf("Repository = %+v", c.Repository)
	}
}

func TestPassword(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fromFile := f.mustLoad(f.write("a.toml", minimal), nil)
	if pw, err := fromFile.Password(); err != nil || string(pw) != passwordContent {
		t.Errorf("Password from file = %q, %v", pw, err)
	}
	envFile := f.write("b.toml", strings.Replace(minimal, `password_file = "{{dir}}/repo.pw"`, `password_env = "LB_PW"`, 1))
	fromEnv := f.mustLoad(envFile, map[string]string{"LB_PW": "s3cr3t-env-value"})
	if pw, err := fromEnv.Password(); err != nil || string(pw) != "s3cr3t-env-value" {
		t.Errorf("Password from env = %q, %v", pw, err)
	}
	unset := f.mustLoad(envFile, nil)
	if _, err := unset.Password(); err == nil || !strings.Contains(err.Error(), "LB_PW") {
		t.Errorf("Password with LB_PW unset: %v, want an error naming LB_PW", err)
	}
	empty := f.write("empty.pw", "\n")
	c := f.mustLoad(f.write("c.toml", minimal), nil, "repository.password_file="+empty)
	if _, err := c.Password(); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("Password from an empty file: %v, want an error naming it", err)
	}
}

func TestServerURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := f.write("lifeboat.toml", minimal)
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{nil, "http://127.0.0.1:8080"},
		{[]string{"server.listen=:9000"}, "http://127.0.0.1:9000"},
		{[]string{"server.listen=0.0.0.0:9000"}, "http://127.0.0.1:9000"},
		{[]string{"server.listen=[::]:9000"}, "http://[::1]:9000"},
		{[]string{"server.listen=10.1.2.3:9000", "server.tls_cert={{dir}}/tls.crt", "server.tls_key={{dir}}/tls.key"}, "https://10.1.2.3:9000"},
		{[]string{"server.url=https://lb.example/api/"}, "https://lb.example/api"},
	} {
		if got := f.mustLoad(path, nil, tc.sets...).ServerURL(); got != tc.want {
			t.Errorf("%v: ServerURL = %q, want %q", tc.sets, got, tc.want)
		}
	}
}

// [retention] every alone is a schedule for the stored policies: no
// default policy, no error.
func TestLoadRetentionScheduleAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.mustLoad(f.write("lifeboat.toml", minimal+"\n[retention]\nevery = \"5m\"\n"), nil)
	if c.Retention != nil || c.RetentionEvery != 5*time.Minute {
		t.Fatalf("[retention] every alone: policy %+v, every %v; want none and 5m", c.Retention, c.RetentionEvery)
	}
}
