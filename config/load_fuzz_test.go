package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoad: the config file is written by people and tools. Load reads any
// bytes as the file (no environment, no flags) and either returns a
// configuration or Errors, each with a message and the file as its source
// (or none); never a panic. A configuration loads the same way twice (the
// same values, the same `config show`), and what Show writes, loaded as a
// config file, gives the same values again.
func FuzzLoad(f *testing.F) {
	dir := f.TempDir()
	for name, content := range map[string]string{"repo.pw": "pw\n", "tokens": "t\n", "id_ed25519": "k\n", "known_hosts": "h\n",
		"tls.crt": "c\n", "tls.key": "k\n", "client.tok": "t\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	expand := func(s string) []byte { return []byte(strings.ReplaceAll(s, "{{dir}}", dir)) }
	f.Add(expand(full))
	f.Add(expand(strings.Replace(full, "keep_daily = 7", "keep_daily = -7", 1)))
	f.Add(expand(strings.Replace(full, "[prune]", "[prune]\nunknown = 1", 1)))
	f.Add([]byte(`[repository]
location = "/srv/repo"
password_env = "LB_PW"
`))
	f.Add([]byte("[repository]\nlocation = \"a\"\nlocation = \"b\"\n"))
	f.Add([]byte("[[quiesce.hook]]\nname = \"x\"\npause = []\n[[quiesce.hook]]\nname = \"x\"\n"))
	f.Add([]byte("[lifecycle]\npark_interval = \"-1s\"\nmax_parallel = 9999999999999999999999\n"))
	f.Add([]byte("[providers.a]\ntype = \"ssh\"\nport = 0x10000\n[workspaces.\"bad id!\"]\n"))
	f.Add([]byte("= broken"))
	f.Add([]byte{})
	path := filepath.Join(dir, "lifeboat.toml")
	shown := filepath.Join(dir, "shown.toml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(Options{Path: path})
		if err != nil {
			var errs Errors
			if c != nil || !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Load = %v, %v; want nil and Errors", c, err)
			}
			for _, e := range errs {
				if e.Msg == "" || (e.File != path && e.File != "") {
					t.Fatalf("error %+v: want a message, from %s or no file", e, path)
				}
			}
			return
		}
		var out bytes.Buffer
		if err := c.Show(&out); err != nil {
			t.Fatal(err)
		}
		c2, err := Load(Options{Path: path})
		if err != nil {
			t.Fatalf("loads once, not twice: %v", err)
		}
		var out2 bytes.Buffer
		_ = c2.Show(&out2)
		if !sameValues(c, c2) || out.String() != out2.String() {
			t.Fatalf("two loads differ:\n%s\n%s", out.String(), out2.String())
		}
		if err := os.WriteFile(shown, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		c3, err := Load(Options{Path: shown})
		if err != nil {
			t.Fatalf("what config show wrote does not load: %v\n%s", err, out.String())
		}
		if !sameValues(c, c3) {
			t.Fatalf("what config show wrote loads to other values:\n%+v\n%+v\n%s", *c, *c3, out.String())
		}
	})
}

// sameValues compares the exported fields of two configurations.
func sameValues(a, b *Config) bool {
	x, y := *a, *b
	x.file, x.env, x.show = "", nil, nil
	y.file, y.env, y.show = "", nil, nil
	return reflect.DeepEqual(&x, &y)
}
