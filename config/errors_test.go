package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// tmpl is a valid file with places for a case's lines.
const tmpl = `{{top}}
[repository]
location = "{{dir}}/repo"
password_file = "{{dir}}/repo.pw"
{{repo}}
[state]
dir = "{{dir}}/state"

[server]
tokens_file = "{{dir}}/tokens"
{{server}}
{{more}}
`

// wantErr is one expected error. at is a piece of the config file whose
// (first) line the error names; src, for values from the environment or
// a flag, is the Error's File.
type wantErr struct {
	at, src, key, msg string
}

const sshBox = `[providers.box1]
type = "ssh"
host = "10.0.0.5"
user = "lifeboat"
key_file = "{{dir}}/id_ed25519"
known_hosts = "{{dir}}/known_hosts"
root = "/home/lifeboat/workspaces"
`

// errorCase is a config that must not load: tmpl with top, repo, server
// and more filled in, env and sets on top, and the errors it must give.
type errorCase struct {
	name                    string
	top, repo, server, more string
	env                     map[string]string
	sets                    []string
	want                    []wantErr
}

func TestErrors(t *testing.T) {
	t.Parallel()
	checkErrorCases(t, []errorCase{
		{name: "unknown top-level key", top: `bogus = 1`,
			want: []wantErr{{at: "bogus", key: "bogus", msg: `unknown table or key "bogus" at the top level`}}},
		{name: "unknown table", more: "[serve]\nlisten = \"x\"",
			want: []wantErr{{at: "[serve]", key: "serve", msg: `unknown table or key "serve"`}}},
		{name: "unknown key in a section", server: `lisen = "127.0.0.1:1"`,
			want: []wantErr{{at: "lisen", key: "server.lisen", msg: `unknown key "lisen" in [server]; its keys are listen, tokens_file`}}},
		{name: "unknown key in a provider", more: "[providers.p]\ntype = \"local\"\nroot = \"/x\"\nhost = \"h\"",
			want: []wantErr{{at: `host = "h"`, key: "providers.p.host", msg: `unknown key "host" in a local provider; its keys are type, root`}}},
		{name: "unknown key in a hook", more: "[[quiesce.hook]]\nname = \"a\"\npause = [\"p\"]\nresume = [\"r\"]\ncommand = \"x\"",
			want: []wantErr{{at: "command", key: "quiesce.hook[0].command", msg: `unknown key "command" in [[quiesce.hook]]`}}},
		{name: "wrong type", more: strings.Replace(sshBox, `host = "10.0.0.5"`, `host = "10.0.0.5"`+"\nport = \"ssh\"", 1),
			want: []wantErr{{at: `port = "ssh"`, key: "providers.box1.port", msg: `want an integer, got string "ssh"`}}},
		{name: "wrong type of a string", server: `listen = 8080`,
			want: []wantErr{{at: "listen", key: "server.listen", msg: "want a string, got integer 8080"}}},
		{name: "bad duration", more: "[lifecycle]\npark_interval = \"5 minutes\"",
			want: []wantErr{{at: "park_interval", key: "lifecycle.park_interval", msg: `bad duration "5 minutes"`}}},
		{name: "duration not a string", more: "[lifecycle]\ncheck_interval = 60",
			want: []wantErr{{at: "check_interval", key: "lifecycle.check_interval", msg: "want a duration string such as \"30s\", \"5m\" or \"1h30m\", got integer 60"}}},
		{name: "zero server timeout", server: `read_timeout = "0s"`,
			want: []wantErr{{at: "read_timeout", key: "server.read_timeout", msg: "must be greater than 0"}}},
		{name: "bad server timeout", server: `write_timeout = "soon"`,
			want: []wantErr{{at: "write_timeout", key: "server.write_timeout", msg: `bad duration "soon"`}}},
		{name: "server timeout not a string", server: `idle_timeout = 60`,
			want: []wantErr{{at: "idle_timeout", key: "server.idle_timeout", msg: "want a duration string such as \"30s\", \"5m\" or \"1h30m\", got integer 60"}}},
		{name: "server timeout off", sets: []string{"server.idle_timeout=off"},
			want: []wantErr{{src: flagFile, key: "server.idle_timeout", msg: `bad duration "off"`}}},
		{name: "zero duration", more: "[workspaces.bot1]\npark_interval = \"0s\"",
			want: []wantErr{{at: "park_interval", key: "workspaces.bot1.park_interval", msg: "must be greater than 0"}}},
		{name: "bad redact pattern", more: "[lifecycle]\nredact = [\"token=\\\\S+\", \"(unclosed\"]",
			want: []wantErr{{at: "redact", key: "lifecycle.redact", msg: `pattern "(unclosed" is not a regular expression`}}},
		{name: "out of range", more: "[lifecycle]\nmax_parallel = 0",
			want: []wantErr{{at: "max_parallel", key: "lifecycle.max_parallel", msg: "0 is out of range: want at least 1"}}},
		{name: "bad enum", more: "[log]\nlevel = \"verbose\"",
			want: []wantErr{{at: "level", key: "log.level", msg: `want one of debug, info, warn, error, got "verbose"`}}},
		{name: "missing secret file", more: strings.Replace(sshBox, "id_ed25519", "missing_key", 1),
			want: []wantErr{{at: "key_file", key: "providers.box1.key_file", msg: "missing_key: no such file or directory"}}},
		{name: "missing password file", sets: []string{"repository.password_file={{dir}}/nope.pw"},
			want: []wantErr{{src: flagFile, key: "repository.password_file", msg: "nope.pw: no such file or directory"}}},
		{name: "missing tokens file from env", env: map[string]string{"LIFEBOAT_SERVER_TOKENS_FILE": "/nonexistent/tokens"},
			want: []wantErr{{src: "environment LIFEBOAT_SERVER_TOKENS_FILE", key: "server.tokens_file", msg: "cannot read file /nonexistent/tokens"}}},
		{name: "secret file is a directory", server: `token_file = "{{dir}}"`,
			want: []wantErr{{at: "token_file", key: "server.token_file", msg: "is a directory"}}},
		{name: "unknown provider type", more: "[providers.d]\ntype = \"podman\"\nimage = \"x\"",
			want: []wantErr{{at: `type = "podman"`, key: "providers.d.type", msg: `unknown provider type "podman"; known types: local, ssh, vercel, daytona, cloudflare, docker`}}},
		{name: "docker plain tcp", more: "[providers.d]\ntype = \"docker\"\nhost = \"tcp://10.0.0.5:2375\"\nimage = \"x\"",
			want: []wantErr{{at: `host = "tcp`, key: "providers.d.host", msg: "is tcp: set tls_ca, tls_cert and tls_key"}}},
		{name: "docker bad host, mount, label, workdir, no image",
			more: "[providers.d]\ntype = \"docker\"\nhost = \"http://x\"\nmounts = [\"/src\"]\nlabels = [\"lifeboat.managed=false\"]\nworkdir = \"rel\"",
			want: []wantErr{
				{at: "[providers.d]", key: "providers.d.image", msg: "missing"},
				{at: `host = "http`, key: "providers.d.host", msg: "is not a Docker daemon address"},
				{at: "mounts", key: "providers.d.mounts", msg: `mount "/src": want SOURCE:/container/path`},
				{at: "labels", key: "providers.d.labels", msg: `label "lifeboat.managed=false"`},
				{at: "workdir", key: "providers.d.workdir", msg: `workdir "rel" must be an absolute directory`},
			}},
		{name: "provider without type", more: "[providers.d]\nroot = \"/x\"",
			want: []wantErr{{at: "[providers.d]", key: "providers.d.type", msg: "missing: this key is required; known types: local, ssh, vercel, daytona, cloudflare, docker"}}},
		{name: "inline password", repo: `password = "hunter2"`,
			want: []wantErr{{at: "hunter2", key: "repository.password",
				msg: `unknown key "password": secrets are given by file (password_file) or environment variable name (password_env), never inline`}}},
		{name: "inline password at the top", top: `passphrase = "hunter2"`,
			want: []wantErr{{at: "hunter2", key: "passphrase", msg: "never inline"}}},
		{name: "inline key in a provider", more: sshBox + `key = "hunter2"`,
			want: []wantErr{{at: "hunter2", key: "providers.box1.key", msg: "secrets are given by file (key_file"}}},
		{name: "inline token in server", server: `token = "hunter2"`,
			want: []wantErr{{at: "hunter2", key: "server.token", msg: "secrets are given by file (token_file"}}},
		{name: "inline secret by flag", sets: []string{"repository.password=hunter2"},
			want: []wantErr{{src: flagFile, key: "repository.password", msg: "never inline"}}},
		{name: "both password sources", repo: `password_env = "LB_PW"`,
			want: []wantErr{{at: "password_env", key: "repository.password_env", msg: "password_file (FILE:4) and password_env are both set: give exactly one"}}},
		{name: "both password sources in the environment",
			env:  map[string]string{"LIFEBOAT_PASSWORD_FILE": "{{dir}}/repo.pw", "LIFEBOAT_REPOSITORY_PASSWORD_ENV": "LB_PW"},
			want: []wantErr{{src: "environment LIFEBOAT_REPOSITORY_PASSWORD_ENV", key: "repository.password_env", msg: "both set"}}},
		{name: "no password source", sets: []string{"repository.password_file="},
			want: []wantErr{{at: "[repository]", key: "repository", msg: "no password source: set password_file"}}},
		{name: "password_env holds a value", repo: "password_env = \"hunter 2\"", sets: []string{"repository.password_file="},
			want: []wantErr{{at: "password_env", key: "repository.password_env", msg: "is not an environment variable name"}}},
		{name: "missing required key names its section", more: "[providers.p]\ntype = \"local\"",
			want: []wantErr{{at: "[providers.p]", key: "providers.p.root", msg: "missing: this key is required"}}},
		{name: "required key emptied by a flag", sets: []string{"state.dir="},
			want: []wantErr{{src: flagFile, key: "state.dir", msg: "missing: this key is required (set it in [state], with the environment variable LIFEBOAT_STATE_DIR"}}},
		{name: "duplicate hook names",
			more: "[[quiesce.hook]]\nname = \"agent\"\npause = [\"a\"]\nresume = [\"b\"]\n\n[[quiesce.hook]]\nname = \"agent\" # again\npause = [\"a\"]\nresume = [\"b\"]",
			want: []wantErr{{at: "# again", key: "quiesce.hook[1].name", msg: `duplicate hook name "agent" (first at FILE:`}}},
		{name: "hook without pause", more: "[[quiesce.hook]]\nname = \"a\"\nresume = [\"b\"]",
			want: []wantErr{{at: "[[quiesce.hook]]", key: "quiesce.hook[0].pause", msg: "missing"}}},
		{name: "hook with bad argv", more: "[[quiesce.hook]]\nname = \"a\"\npause = \"pkill -STOP agent\"\nresume = [\"b\", 1]",
			want: []wantErr{
				{at: "pause", key: "quiesce.hook[0].pause", msg: `want an argv array of strings such as ["pkill", "-STOP", "-f", "agent"], got string "pkill -STOP agent"`},
				{at: "resume", key: "quiesce.hook[0].resume", msg: "got integer 1 at index 1"},
			}},
		{name: "hook for a bad workspace id", more: "[[quiesce.hook]]\nname = \"a\"\npause = [\"a\"]\nresume = [\"b\"]\nworkspaces = [\"../x\"]",
			want: []wantErr{{at: "workspaces", key: "quiesce.hook[0].workspaces", msg: `bad workspace id "../x"`}}},
		{name: "bad instance name", more: "[providers.\"-box\"]\ntype = \"local\"\nroot = \"/x\"",
			want: []wantErr{{at: `[providers."-box"]`, key: "providers.-box", msg: `bad provider instance name "-box": want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit`}}},
		{name: "instance name too long", sets: []string{"providers." + strings.Repeat("a", 129) + ".type=local"},
			want: []wantErr{{src: flagFile, key: "providers." + strings.Repeat("a", 129), msg: "bad provider instance name"}}},
		{name: "bad workspace id", more: "[workspaces.\"a/b\"]\npark_interval = \"1m\"",
			want: []wantErr{{at: "[workspaces", key: "workspaces.a/b", msg: `bad workspace id "a/b"`}}},
		{name: "workspace override of another key", more: "[workspaces.bot1]\nmax_parallel = 3",
			want: []wantErr{{at: "max_parallel", key: "workspaces.bot1.max_parallel", msg: "its keys are park_interval, periodic_interval"}}},
		{name: "tls_cert without tls_key", server: `tls_cert = "{{dir}}/tls.crt"`,
			want: []wantErr{{at: "tls_cert", key: "server.tls_cert", msg: "tls_cert is set but tls_key is not: set both (HTTPS) or neither (HTTP)"}}},
		{name: "tls_key without tls_cert", sets: []string{"server.tls_key={{dir}}/tls.key"},
			want: []wantErr{{src: flagFile, key: "server.tls_key", msg: "tls_key is set but tls_cert is not"}}},
		{name: "url with credentials", server: `url = "https://user:hunter2@lb.example"`,
			want: []wantErr{{at: "url", key: "server.url", msg: "the URL holds credentials"}}},
		{name: "ssh root", more: strings.Replace(sshBox, `root = "/home/lifeboat/workspaces"`, `root = "/"`, 1),
			want: []wantErr{{at: `root = "/"`, key: "providers.box1.root", msg: "must be an absolute directory on the host other than /"}}},
		{name: "ssh missing keys", more: "[providers.box1]\ntype = \"ssh\"\nhost = \"h\"",
			want: []wantErr{
				{at: "[providers.box1]", key: "providers.box1.user", msg: "missing"},
				{at: "[providers.box1]", key: "providers.box1.key_file", msg: "missing"},
				{at: "[providers.box1]", key: "providers.box1.known_hosts", msg: "missing"},
				{at: "[providers.box1]", key: "providers.box1.root", msg: "missing"},
			}},
		{name: "negative retention", more: "[retention]\nkeep_daily = -1\nkeep_within = \"-1h\"",
			want: []wantErr{
				{at: "keep_daily", key: "retention.keep_daily", msg: "invalid policy: negative count -1"},
				{at: "keep_within", key: "retention.keep_within", msg: "invalid policy: negative duration -1h0m0s"},
			}},
		{name: "retention without a rule", more: "[retention]",
			want: []wantErr{{at: "[retention]", key: "retention", msg: "the policy has no rule"}}},
		{name: "bad max_unused", more: "[prune]\nmax_unused = \"200%\"\nevery = \"-1h\"",
			want: []wantErr{
				{at: "max_unused", key: "prune.max_unused", msg: `want a percentage from 0% to 100%`},
				{at: "every", key: "prune.every", msg: "is negative"},
			}},
		{name: "bad value from the environment", env: map[string]string{"LIFEBOAT_SERVER_LISTEN": "localhost"},
			want: []wantErr{{src: "environment LIFEBOAT_SERVER_LISTEN", key: "server.listen", msg: `want host:port (such as 127.0.0.1:8080), got "localhost"`}}},
		{name: "bad flags", sets: []string{"server.listen", "server=1", "quiesce.hook.name=x", "providers.box1=x", "server.nope=1", "lifecycle.max_parallel=two"},
			want: []wantErr{
				{src: flagFile, key: "server.listen", msg: "want KEY=VALUE"},
				{src: flagFile, key: "server", msg: "[server] is a table: want server.KEY=VALUE"},
				{src: flagFile, key: "quiesce.hook.name", msg: "quiesce hooks are set in the config file only"},
				{src: flagFile, key: "providers.box1", msg: "want providers.NAME.KEY=VALUE"},
				{src: flagFile, key: "server.nope", msg: `unknown key "nope" in [server]`},
				{src: flagFile, key: "lifecycle.max_parallel", msg: `want an integer, got "two"`},
			}},
		{name: "a file value replaced by a flag is still checked", more: "[lifecycle]\nmax_parallel = \"two\"", sets: []string{"lifecycle.max_parallel=3"},
			want: []wantErr{{at: "max_parallel", key: "lifecycle.max_parallel", msg: `want an integer, got string "two" (replaced by flag, but wrong all the same)`}}},
		{name: "not a table", top: "providers = 3",
			want: []wantErr{{at: "providers = 3", key: "providers", msg: "want a table of named tables [providers.NAME], got integer 3"}}},
		{name: "dotted key at the top", top: `lifecycle.park_interval = "soon"`,
			want: []wantErr{{at: "soon", key: "lifecycle.park_interval", msg: `bad duration "soon"`}}},
		{name: "inline table", more: "[providers]\nbox2 = { type = \"local\", root = \"/x\", color = \"red\" }",
			want: []wantErr{{at: "color", key: "providers.box2.color", msg: `unknown key "color" in a local provider`}}},
		{name: "hooks as an array of inline tables",
			more: "[quiesce]\nhook = [\n  { name = \"a\", pause = [\"p\"], resume = [\"r\"] },\n  { name = \"a\", pause = [\"p\"], resume = [\"r\"], x = 1 },\n]",
			want: []wantErr{
				{at: "x = 1", key: "quiesce.hook[1].name", msg: "duplicate hook name"},
				{at: "x = 1", key: "quiesce.hook[1].x", msg: `unknown key "x" in [[quiesce.hook]]`},
			}},
		{name: "several errors in one file",
			top:    `secret = "x"`,
			repo:   `password_env = "LB_PW"`,
			server: "listen = \"nohost\"\ntls_key = \"{{dir}}/tls.key\"",
			more:   "[lifecycle]\npark_interval = \"5 minutes\"\nmax_parallel = -1\n\n" + strings.Replace(sshBox, `port`, `x`, 1) + "port = \"22\"\n\n[providers.zz]\ntype = \"vm\"",
			env:    map[string]string{"LIFEBOAT_LOG_FORMAT": "xml"},
			want: []wantErr{
				{at: "secret", key: "secret", msg: "never inline"},
				{at: "password_env", key: "repository.password_env", msg: "both set"},
				{at: "nohost", key: "server.listen", msg: "want host:port"},
				{at: "tls_key", key: "server.tls_key", msg: "tls_key is set but tls_cert is not"},
				{at: "park_interval", key: "lifecycle.park_interval", msg: "bad duration"},
				{at: "max_parallel", key: "lifecycle.max_parallel", msg: "out of range"},
				{at: `port = "22"`, key: "providers.box1.port", msg: `want an integer, got string "22"`},
				{at: `type = "vm"`, key: "providers.zz.type", msg: `unknown provider type "vm"`},
				{src: "environment LIFEBOAT_LOG_FORMAT", key: "log.format", msg: `want one of text, json, got "xml"`},
			}},
	})
}

// checkErrorCases loads each case in a subtest and checks its errors
// (checkErrors); no error may repeat an inline secret's value.
func checkErrorCases(t *testing.T, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			text := strings.NewReplacer("{{top}}", tc.top, "{{repo}}", tc.repo, "{{server}}", tc.server, "{{more}}", tc.more).Replace(tmpl)
			path := f.write("lifeboat.toml", text)
			env := map[string]string{}
			for k, v := range tc.env {
				env[k] = f.expand(v)
			}
			_, err := f.load(path, env, tc.sets...)
			checkErrors(t, err, path, text, tc.want)
			if err != nil && strings.Contains(err.Error(), "hunter2") && !strings.Contains(tc.name, "url") {
				t.Errorf("an error repeats an inline secret's value:\n%v", err)
			}
		})
	}
}

// checkErrors matches every error with one wanted error, and the reverse.
// text is the config before {{dir}} is expanded (the temporary directory's
// name holds the test's name).
func checkErrors(t *testing.T, err error, path, text string, want []wantErr) {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Load: %v, want Errors", err)
	}
	lines := strings.Split(text, "\n")
	lineOf := func(at string) int {
		for i, l := range lines {
			if strings.Contains(l, at) {
				return i + 1
			}
		}
		t.Fatalf("%q is not in the config", at)
		return 0
	}
	matched := make([]bool, len(errs))
	for _, w := range want {
		file, line := w.src, 0
		if w.at != "" {
			file, line = path, lineOf(w.at)
		}
		msg := strings.ReplaceAll(w.msg, "FILE", path)
		found := false
		for i, e := range errs {
			if !matched[i] && e.File == file && e.Line == line && e.Key == w.key && strings.Contains(e.Msg, msg) {
				matched[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("no error %s", (&Error{File: file, Line: line, Key: w.key, Msg: msg + "..."}).Error())
		}
	}
	for i, e := range errs {
		if !matched[i] {
			t.Errorf("unexpected error %s", e)
		}
	}
	if t.Failed() {
		t.Logf("all errors:\n%v", err)
	}
}

// TestErrorFormat: FILE:LINE: KEY: MSG, environment NAME: KEY: MSG and
// flag --set KEY: MSG, one per line, the file's by line first.
func TestErrorFormat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := f.write("lifeboat.toml", minimal+"\n"+sshBox+`port = "ssh"`+"\n")
	_, err := f.load(path, map[string]string{"LIFEBOAT_SERVER_LISTEN": "x"}, "server.url=ftp://x")
	want := fmt.Sprintf(`%s:18: providers.box1.port: want an integer, got string "ssh"
environment LIFEBOAT_SERVER_LISTEN: server.listen: want host:port (such as 127.0.0.1:8080), got "x"
flag --set server.url: want an http:// or https:// URL such as https://lifeboat.internal:8080, got "ftp://x"`, path)
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

func TestSyntaxError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := f.write("lifeboat.toml", minimal+"[lifecycle\npark_interval = \"1m\"\n")
	_, err := f.load(path, nil)
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].File != path || errs[0].Line != 10 {
		t.Fatalf("Load: %v, want one error at line 10", err)
	}
	path = f.write("dup.toml", minimal+"listen = \"a:1\"\nlisten = \"b:2\"\n")
	_, err = f.load(path, nil)
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Line != 11 || !strings.Contains(errs[0].Msg, "already defined") {
		t.Fatalf("Load: %v, want a duplicate key at line 11", err)
	}
}

func TestMissingConfigFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := Load(Options{Path: f.dir + "/nope.toml"})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || !strings.Contains(err.Error(), "nope.toml: no such file or directory") {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Load(Options{Path: f.write("ok.toml", minimal), LookupEnv: lookup(nil)}); err != nil {
		t.Fatalf("Load of a valid file: %v", err)
	}
}

func TestUnreadableSecretFile(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	f := newFixture(t)
	if err := os.Chmod(f.dir+"/id_ed25519", 0); err != nil {
		t.Fatal(err)
	}
	path := f.write("lifeboat.toml", minimal+sshBox)
	_, err := f.load(path, nil)
	checkErrors(t, err, path, minimal+sshBox, []wantErr{{at: "key_file", key: "providers.box1.key_file", msg: "permission denied"}})
}

// TestNothingSet: without a file, missing keys name no line.
func TestNothingSet(t *testing.T) {
	t.Parallel()
	_, err := Load(Options{})
	checkErrors(t, err, "", "", []wantErr{
		{key: "repository.location", msg: "missing: this key is required (set it in [repository], with the environment variable LIFEBOAT_REPOSITORY_LOCATION or LIFEBOAT_REPO, or with --set repository.location=...)"},
		{key: "repository", msg: "no password source"},
		{key: "state.dir", msg: "missing"},
		{key: "server.tokens_file", msg: "missing"},
	})
	f := newFixture(t)
	path := f.write("lifeboat.toml", strings.Replace(minimal, "[state]", "[stat]", 1))
	_, err = f.load(path, nil)
	checkErrors(t, err, path, minimal, []wantErr{
		{src: path, key: "state.dir", msg: "missing"},
		{at: "[state]", key: "stat", msg: `unknown table or key "stat"`},
	})
}
