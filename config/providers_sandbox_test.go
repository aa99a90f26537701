package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

const sandboxProviders = `
[providers.sbx]
type = "e2b"
api_key_env = "E2B_KEY"
sandbox_url = "http://127.0.0.1:9/"
workspace = "/home/user/src/app"
sandbox_timeout = "10m"

[providers.agents]
type = "managed-agents"
token_file = "{{dir}}/client.tok"
checkpoint_timeout = "2m"
`

func TestSandboxProviders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.mustLoad(f.write("c.toml", minimal+sandboxProviders), map[string]string{"E2B_KEY": "e2b_secret_value"})
	var e E2BProvider
	var m ManagedAgentsProvider
	for _, p := range c.Providers {
		switch p := p.(type) {
		case E2BProvider:
			e = p
		case ManagedAgentsProvider:
			m = p
		}
	}
	if e.Name != "sbx" || e.BaseURL != "https://api.e2b.app" || e.SandboxURL != "http://127.0.0.1:9" || e.Workspace != "/home/user/src/app" ||
		e.User != "user" || e.SandboxTimeout != 10*time.Minute || e.Timeout != 30*time.Second ||
		e.Transfer != 30*time.Minute || e.Ready != time.Minute || e.Template != "base" || !strings.HasSuffix(e.CacheDir, "/state/mirrors/sbx") {
		t.Fatalf("e2b provider: %+v", e)
	}
	if k, err := c.Secret(e.APIKey); err != nil || k != "e2b_secret_value" {
		t.Fatalf("e2b API key: %q, %v", k, err)
	}
	if m.Name != "agents" || m.BaseURL != "https://api.digitalocean.com" || m.CheckpointTimeout != 2*time.Minute || m.Label != "lifeboat" {
		t.Fatalf("managed-agents provider: %+v", m)
	}
	if tok, err := c.Secret(m.Token); err != nil || tok != "client-token" {
		t.Fatalf("managed-agents token: %q, %v", tok, err)
	}
	var out bytes.Buffer
	if err := c.Show(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "e2b_secret_value") || strings.Contains(out.String(), "client-token") {
		t.Fatalf("config show prints a secret:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "E2B_KEY is set (its value is never shown)") {
		t.Fatalf("config show does not say the key variable is set:\n%s", out.String())
	}
	// An unset variable is an error when the key is read, naming it.
	c = f.mustLoad(f.write("c.toml", minimal+sandboxProviders), nil)
	for _, p := range c.Providers {
		if e, ok := p.(E2BProvider); ok {
			if _, err := c.Secret(e.APIKey); err == nil || !strings.Contains(err.Error(), "E2B_KEY (api_key_env) is not set") {
				t.Fatalf("unset key variable: %v", err)
			}
		}
	}
}

func TestSandboxProviderErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, table string
		key, msg    string
		line        int
	}{
		{"both key sources", "[providers.sbx]\ntype = \"e2b\"\napi_key_env = \"K\"\napi_key_file = \"{{dir}}/client.tok\"\n",
			"providers.sbx.api_key_env", "both set", 13},
		{"no key", "[providers.sbx]\ntype = \"e2b\"\n", "providers.sbx", "no api_key: set api_key_file", 11},
		{"inline key", "[providers.sbx]\ntype = \"e2b\"\napi_key = \"e2b_inline\"\n", "providers.sbx.api_key", "never inline", 13},
		{"relative workspace", "[providers.sbx]\ntype = \"e2b\"\napi_key_env = \"K\"\nworkspace = \"work\"\n", "providers.sbx.workspace", "absolute directory", 14},
		{"dash workspace", "[providers.sbx]\ntype = \"e2b\"\napi_key_env = \"K\"\nworkspace = \"/home/user/-delete\"\n", "providers.sbx.workspace", "starts with -", 14},
		{"root workspace", "[providers.sbx]\ntype = \"e2b\"\napi_key_env = \"K\"\nworkspace = \"/\"\n", "providers.sbx.workspace", "other than /", 14},
		{"bad url", "[providers.sbx]\ntype = \"e2b\"\napi_key_env = \"K\"\nsandbox_url = \"ftp://x\"\n", "providers.sbx.sandbox_url", "", 14},
		{"no token", "[providers.ag]\ntype = \"managed-agents\"\n", "providers.ag", "no token: set token_file", 11},
		{"unknown key", "[providers.ag]\ntype = \"managed-agents\"\ntoken_env = \"T\"\nworkspace = \"w\"\n", "providers.ag.workspace", "unknown key", 14},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			path := f.write("c.toml", minimal+"\n"+c.table)
			_, err := f.load(path, nil)
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("Load = %v, want config errors", err)
			}
			for _, e := range es {
				if e.Key == c.key && strings.Contains(e.Msg, c.msg) && e.File == path && e.Line == c.line {
					if strings.Contains(err.Error(), "e2b_inline") {
						t.Fatalf("the error repeats an inline secret: %v", err)
					}
					return
				}
			}
			t.Fatalf("no error at %s:%d %s %q in:\n%v", path, c.line, c.key, c.msg, err)
		})
	}
}
