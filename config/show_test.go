package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func show(t *testing.T, c *Config) string {
	t.Helper()
	var b strings.Builder
	if err := c.Show(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestShowRedacts: no secret file's content and no password variable's
// value appears, only paths, names and whether the variable is set.
func TestShowRedacts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const envSecret = "s3cr3t-env-value"
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"password file", full, map[string]string{"LB_PW": envSecret},
			[]string{`password_env = "LB_PW"`, "LB_PW is set (its value is never shown)", `key_file = "` + f.dir + `/id_ed25519"`}},
		{"password variable unset", full, nil, []string{"LB_PW is not set"}},
		{"password file named", minimal, map[string]string{"LB_PW": envSecret},
			[]string{`password_file = "` + f.dir + `/repo.pw"`, "its content is never shown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := show(t, f.mustLoad(f.write("lifeboat.toml", tc.file), tc.env))
			for _, secret := range []string{passwordContent, envSecret, "PRIVATE KEY", "client-token", "sha256:"} {
				if strings.Contains(out, secret) {
					t.Errorf("Show prints %q:\n%s", secret, out)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("Show lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestShowSources: each line says where its value came from.
func TestShowSources(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := f.write("lifeboat.toml", minimal+"\n"+sshBox)
	c := f.mustLoad(path, map[string]string{"LIFEBOAT_SERVER_LISTEN": "127.0.0.1:9000"}, "providers.box1.port=2222")
	out := show(t, c)
	// Comments are aligned per table; compare with one space pair.
	aligned := regexp.MustCompile(` {2,}# `).ReplaceAllString(out, "  # ")
	for _, want := range []string{
		`location = "` + f.dir + `/repo"`,
		"# " + path + ":2\n",
		"listen = \"127.0.0.1:9000\"",
		"# env LIFEBOAT_SERVER_LISTEN\n",
		"port = 2222",
		"# flag\n",
		`format = "text"  # default` + "\n",
		`url = "http://127.0.0.1:9000"  # default: from listen`,
		`native_interval = "5m"  # default: park_interval`,
		`cache_dir = "` + f.dir + `/state/mirrors/box1"  # default: <state.dir>/mirrors/<name>`,
		"# [retention] is not set: workspaces without a stored policy keep every snapshot",
	} {
		if !strings.Contains(aligned, want) {
			t.Errorf("Show lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " = ") && !strings.Contains(line, "  # ") {
			t.Errorf("line without a source: %q", line)
		}
	}
	if again := show(t, f.mustLoad(path, map[string]string{"LIFEBOAT_SERVER_LISTEN": "127.0.0.1:9000"}, "providers.box1.port=2222")); again != out {
		t.Errorf("Show is not deterministic:\n%s\n---\n%s", out, again)
	}
}

// TestShowRoundTrip: Show's output is a config file that loads into the
// same configuration.
func TestShowRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	env := map[string]string{"LB_PW": "x", "LIFEBOAT_LOG_LEVEL": "warn"}
	c := f.mustLoad(f.write("lifeboat.toml", full), env, "providers.box1.port=2222")
	out := show(t, c)
	shown := f.dir + "/shown.toml"
	if err := os.WriteFile(shown, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	again := f.mustLoad(shown, env)
	assertConfig(t, again, c)

	c = f.mustLoad(f.write("min.toml", minimal+"\n"+sshBox), nil)
	if err := os.WriteFile(shown, []byte(show(t, c)), 0o600); err != nil {
		t.Fatal(err)
	}
	assertConfig(t, f.mustLoad(shown, nil), c)
}
