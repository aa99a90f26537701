package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a directory with the files a config names: the password
// file, the token file, an SSH key, known_hosts, a TLS pair and a
// platform's API key.
type fixture struct {
	t   *testing.T
	dir string
}

const passwordContent = "s3cr3t-file-content"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir()}
	for name, content := range map[string]string{
		"repo.pw":     passwordContent + "\n",
		"tokens":      "operator sha256:0000000000000000000000000000000000000000000000000000000000000000 ops\n",
		"id_ed25519":  "PRIVATE KEY MATERIAL\n",
		"known_hosts": "10.0.0.5 ssh-ed25519 AAAA\n",
		"tls.crt":     "CERT\n",
		"tls.key":     "TLS PRIVATE KEY\n",
		"client.tok":  "client-token\n",
		"vercel.tok":  "tok-content\n",
	} {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// write writes a config file; {{dir}} in text becomes the fixture's dir.
func (f *fixture) write(name, text string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(f.expand(text)), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) expand(s string) string { return strings.ReplaceAll(s, "{{dir}}", f.dir) }

func (f *fixture) load(path string, env map[string]string, sets ...string) (*Config, error) {
	f.t.Helper()
	for i := range sets {
		sets[i] = f.expand(sets[i])
	}
	return Load(Options{Path: path, LookupEnv: lookup(env), Sets: sets})
}

func (f *fixture) mustLoad(path string, env map[string]string, sets ...string) *Config {
	f.t.Helper()
	c, err := f.load(path, env, sets...)
	if err != nil {
		f.t.Fatalf("Load: %v", err)
	}
	return c
}

// lookup is an environment made of m.
func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// minimal is the smallest valid file.
const minimal = `[repository]
location = "{{dir}}/repo"
password_file = "{{dir}}/repo.pw"

[state]
dir = "{{dir}}/state"

[server]
tokens_file = "{{dir}}/tokens"
`
