package config

import (
	"lifeboat/backend/s3"
	"log/slog"
	"net"
	"net/url"
	"regexp"

	"lifeboat/prune"
)

func (d *decoder) section(name string) *reader {
	return d.reader([]string{name}, fixedSection(name).keys, "["+name+"]")
}

func (d *decoder) repository(c *Config) {
	r := d.section("repository")
	c.Repository = Repository{
		Location:     r.str("location"),
		PasswordFile: r.str("password_file"),
		PasswordEnv:  r.str("password_env"),
		CacheDir:     r.str("cache_dir"),
		KeyHint:      r.str("key_hint"),
	}
	switch {
	case r.given("password_file") && r.given("password_env"):
		d.fail(r.src("password_env"), []string{"repository", "password_env"},
			"password_file (%s) and password_env are both set: give exactly one", r.src("password_file"))
	case !r.given("password_file") && !r.given("password_env"):
		d.fail(d.tableSource(r.path), []string{"repository"}, "no password source: set password_file (a file holding the password) "+
			`or password_env (the name of an environment variable holding it, such as "LIFEBOAT_PASSWORD")`)
	}
	d.repositoryS3(r, c)
	r.noteEnv(c, "password_env", c.Repository.PasswordEnv)
}

// repositoryS3 reads the s3_* keys and checks an s3: location.
func (d *decoder) repositoryS3(r *reader, c *Config) {
	c.Repository.S3 = S3{
		AccessKeyID: r.str("s3_access_key_id"),
		SecretFile:  r.str("s3_secret_access_key_file"),
		SecretEnv:   r.str("s3_secret_access_key_env"),
		Region:      r.str("s3_region"),
		Addressing:  r.str("s3_addressing"),
		TempDir:     r.str("s3_temp_dir"),
	}
	if r.given("s3_secret_access_key_file") {
		if r.given("s3_secret_access_key_env") {
			d.fail(r.src("s3_secret_access_key_env"), []string{"repository", "s3_secret_access_key_env"},
				"s3_secret_access_key_file (%s) and s3_secret_access_key_env are both set: give exactly one", r.src("s3_secret_access_key_file"))
		}
		c.Repository.S3.SecretEnv = ""
		r.line("s3_secret_access_key_env").note = "not used: s3_secret_access_key_file is set"
	} else {
		r.noteEnv(c, "s3_secret_access_key_env", c.Repository.S3.SecretEnv)
	}
	loc := c.Repository.Location
	if !s3.IsLocation(loc) {
		return
	}
	if _, err := s3.ParseLocation(loc); err != nil {
		d.fail(r.src("location"), []string{"repository", "location"}, "%v", err)
	}
	if c.Repository.S3.AccessKeyID == "" {
		d.fail(r.src("location"), []string{"repository", "s3_access_key_id"},
			"an s3: location needs credentials: set s3_access_key_id (or AWS_ACCESS_KEY_ID) and the secret in s3_secret_access_key_file or the variable s3_secret_access_key_env names (default AWS_SECRET_ACCESS_KEY)")
	}
}

func (d *decoder) state(c *Config) {
	r := d.section("state")
	c.State = State{Dir: r.str("dir"), URL: r.str("url"), PasswordFile: r.str("password_file"), PasswordEnv: r.str("password_env"),
		Lease: r.dur("lease")}
	if c.State.URL == "" {
		if r.given("password_file") || r.given("password_env") {
			d.fail(r.src("url"), []string{"state", "url"}, "a database password is set but no url: set url = \"postgres://USER@HOST:PORT/DATABASE\" or remove the password key")
		}
		return
	}
	r.line("url").val = quote(redactURL(c.State.URL))
	u, err := url.Parse(c.State.URL)
	switch {
	case err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "":
		d.fail(r.src("url"), []string{"state", "url"}, "%s is not a PostgreSQL URL: use postgres://USER@HOST:PORT/DATABASE (or leave url unset for the embedded store in dir)", quote(redactURL(c.State.URL)))
	case hasPassword(u):
		d.fail(r.src("url"), []string{"state", "url"}, "the URL holds a password: remove it from the URL and give it with password_file (a file holding it) or password_env (the name of an environment variable holding it)")
	case r.given("password_file") && r.given("password_env"):
		d.fail(r.src("password_env"), []string{"state", "password_env"}, "password_file (%s) and password_env are both set: give at most one", r.src("password_file"))
	}
	r.noteEnv(c, "password_env", c.State.PasswordEnv)
}

// hasPassword reports whether a database URL carries a password.
func hasPassword(u *url.URL) bool {
	_, ok := u.User.Password()
	return ok || u.Query().Has("password")
}

// redactURL is a database URL with any password replaced.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "REDACTED")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func (d *decoder) server(c *Config) {
	r := d.section("server")
	c.Server = Server{
		Listen:     r.str("listen"),
		TokensFile: r.str("tokens_file"),
		TLSCert:    r.str("tls_cert"),
		TLSKey:     r.str("tls_key"),
		URL:        r.str("url"),
		TokenFile:  r.str("token_file"),

		ReadTimeout:  r.dur("read_timeout"),
		WriteTimeout: r.dur("write_timeout"),
		IdleTimeout:  r.dur("idle_timeout"),

		ShutdownGrace: r.dur("shutdown_grace"),
	}
	if cert, key := r.given("tls_cert"), r.given("tls_key"); cert != key {
		set, unset := "tls_cert", "tls_key"
		if key {
			set, unset = unset, set
		}
		d.fail(r.src(set), []string{"server", set}, "%s is set but %s is not: set both (HTTPS) or neither (HTTP)", set, unset)
	}
	if c.Server.URL == "" && c.Server.Listen != "" {
		c.Server.URL = deriveURL(c.Server.Listen, c.Server.TLS())
		r.line("url").val = quote(c.Server.URL)
	}
}

// deriveURL is the URL of a server listening on listen (host:port).
func deriveURL(listen string, tls bool) string {
	host, port, _ := net.SplitHostPort(listen)
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

func (d *decoder) log(c *Config) {
	r := d.section("log")
	c.Log.Format = r.str("format")
	switch r.str("level") {
	case "debug":
		c.Log.Level = slog.LevelDebug
	case "warn":
		c.Log.Level = slog.LevelWarn
	case "error":
		c.Log.Level = slog.LevelError
	default:
		c.Log.Level = slog.LevelInfo
	}
}

func (d *decoder) lifecycle(c *Config) {
	r := d.section("lifecycle")
	c.Lifecycle = Lifecycle{
		ParkInterval:     r.dur("park_interval"),
		PeriodicInterval: r.dur("periodic_interval"),
		NativeInterval:   r.dur("native_interval"),
		CheckInterval:    r.dur("check_interval"),
		MaxParallel:      r.int("max_parallel"),
		MaxChecks:        r.int("max_checks"),
		QuiesceTimeout:   r.dur("quiesce_timeout"),
	}
	for _, p := range r.list("redact") {
		re, err := regexp.Compile(p)
		if err != nil {
			d.fail(r.src("redact"), []string{"lifecycle", "redact"}, "pattern %q is not a regular expression: %v", p, err)
			continue
		}
		c.Lifecycle.Redact = append(c.Lifecycle.Redact, re)
	}
	if !r.given("native_interval") {
		c.Lifecycle.NativeInterval = c.Lifecycle.ParkInterval
		r.line("native_interval").val = r.line("park_interval").val
	}
}

// retention reads the default policy. Each count and keep_within is
// checked by prune.Policy.Validate; a present [retention] with no rule is
// refused, since it would keep only each workspace's last good root.
func (d *decoder) retention(c *Config) {
	path := []string{"retention"}
	if !d.present(path) {
		d.show = append(d.show, &showTable{comment: "# [retention] is not set: workspaces without a stored policy keep every snapshot"})
		return
	}
	r := d.section("retention")
	p := prune.Policy{
		Last:    r.int("keep_last"),
		Within:  r.dur("keep_within"),
		Hourly:  r.int("keep_hourly"),
		Daily:   r.int("keep_daily"),
		Weekly:  r.int("keep_weekly"),
		Monthly: r.int("keep_monthly"),
		Tags:    r.list("keep_tags"),
	}
	for _, one := range []struct {
		key string
		p   prune.Policy
	}{
		{"keep_last", prune.Policy{Last: p.Last}}, {"keep_within", prune.Policy{Within: p.Within}},
		{"keep_hourly", prune.Policy{Hourly: p.Hourly}}, {"keep_daily", prune.Policy{Daily: p.Daily}},
		{"keep_weekly", prune.Policy{Weekly: p.Weekly}}, {"keep_monthly", prune.Policy{Monthly: p.Monthly}},
	} {
		if err := one.p.Validate(); err != nil {
			d.fail(r.src(one.key), join(path, one.key), "%v", err)
		}
	}
	c.RetentionEvery = r.dur("every")
	if p.Validate() != nil {
		return
	}
	if p.Empty() && r.given("every") {
		return // a schedule for the stored policies alone
	}
	if p.Empty() {
		if !d.anyErrorUnder(path) {
			d.fail(d.tableSource(path), path, "the policy has no rule, so it would keep only each workspace's last good root; "+
				"add keep_* keys (keep_last = 1 keeps the newest snapshot), or remove [retention] to keep every snapshot")
		}
		return
	}
	c.Retention = &p
}

func (d *decoder) anyErrorUnder(path []string) bool {
	prefix := displayKey(path)
	for _, e := range d.errs {
		if e.Key == prefix || len(e.Key) > len(prefix) && e.Key[:len(prefix)+1] == prefix+"." {
			return true
		}
	}
	return false
}

func (d *decoder) prune(c *Config) {
	r := d.section("prune")
	c.Prune = Prune{Every: r.dur("every"), MaxUnused: r.float("max_unused"), DeleteAfter: r.dur("delete_after")}
}
