package config

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const vercelBox = `[providers.vc]
type = "vercel"
api_key_file = "{{dir}}/vercel.tok"
team_id = "team_1"
project_id = "prj_1"
sandbox_timeout = "45m"
`

// TestPlatformErrors: config check names file:line:key for the platform
// providers' mistakes.
func TestPlatformErrors(t *testing.T) {
	t.Parallel()
	checkErrorCases(t, []errorCase{
		{name: "no credential", more: "[providers.d]\ntype = \"daytona\"",
			want: []wantErr{{at: "[providers.d]", key: "providers.d", msg: "no api_key: set api_key_file (a file holding it) or api_key_env (the name of an environment variable holding it)"}}},
		{name: "both credentials", more: vercelBox + "api_key_env = \"VERCEL_TOKEN\"",
			want: []wantErr{{at: "api_key_env", key: "providers.vc.api_key_env", msg: "and api_key_env are both set: give exactly one"}}},
		{name: "missing credential file", more: strings.Replace(vercelBox, "vercel.tok", "nope.tok", 1),
			want: []wantErr{{at: "api_key_file", key: "providers.vc.api_key_file", msg: "nope.tok: no such file or directory"}}},
		{name: "vercel without a project", more: strings.Replace(vercelBox, "project_id = \"prj_1\"\n", "", 1),
			want: []wantErr{{at: "[providers.vc]", key: "providers.vc.project_id", msg: "missing: this key is required"}}},
		{name: "cloudflare without the bridge", more: "[providers.cf]\ntype = \"cloudflare\"\napi_key_env = \"CF_BRIDGE_TOKEN\"",
			want: []wantErr{{at: "[providers.cf]", key: "providers.cf.base_url", msg: "missing: this key is required"}}},
		{name: "relative workspace", more: "[providers.d]\ntype = \"daytona\"\napi_key_env = \"DAYTONA_API_KEY\"\nworkspace = \"work\"",
			want: []wantErr{{at: `workspace = "work"`, key: "providers.d.workspace", msg: `workspace "work" must be an absolute directory`}}},
		{name: "bad base url", more: "[providers.d]\ntype = \"daytona\"\napi_key_env = \"DAYTONA_API_KEY\"\nbase_url = \"app.daytona.io\"",
			want: []wantErr{{at: `base_url = "app`, key: "providers.d.base_url", msg: "want an http:// or https:// URL"}}},
		{name: "inline api key", more: vercelBox + "api_key = \"hunter2\"",
			want: []wantErr{{at: "hunter2", key: "providers.vc.api_key", msg: "api_key_file, or api_key_env naming an environment variable"}}},
		{name: "key of another platform", more: vercelBox + "organization_id = \"org\"",
			want: []wantErr{{at: "organization_id", key: "providers.vc.organization_id", msg: `unknown key "organization_id" in a vercel provider`}}},
	})
}

// TestPlatformCredential: the credential comes from the file or the
// variable, config show names them (and says whether the variable is set)
// and never their content, and errors
// name the file or variable only.
func TestPlatformCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := f.write("lifeboat.toml", minimal+"\n"+vercelBox+"\n[providers.dt]\ntype = \"daytona\"\napi_key_env = \"DAYTONA_API_KEY\"\n")
	c := f.mustLoad(path, map[string]string{"DAYTONA_API_KEY": "dtn-content"})
	var vc, dt PlatformProvider
	for _, p := range c.Providers {
		switch p.InstanceName() {
		case "vc":
			vc = p.(PlatformProvider)
		case "dt":
			dt = p.(PlatformProvider)
		}
	}
	if vc.Kind != TypeVercel || vc.ProjectID != "prj_1" || vc.SandboxTimeout != 45*time.Minute || vc.BaseURL != "https://vercel.com/api" || vc.Workspace != "/vercel/sandbox/workspace" ||
		vc.CacheDir != filepath.Join(f.dir, "state", "mirrors", "vc") {
		t.Fatalf("vercel provider: %+v", vc)
	}
	if k, err := c.Secret(vc.APIKey); err != nil || k != "tok-content" {
		t.Fatalf("Secret(vc.APIKey) = %q, %v", k, err)
	}
	if k, err := c.Secret(dt.APIKey); err != nil || k != "dtn-content" {
		t.Fatalf("Secret(dt.APIKey) = %q, %v", k, err)
	}
	var out bytes.Buffer
	if err := c.Show(&out); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"tok-content", "dtn-content"} {
		if strings.Contains(out.String(), secret) {
			t.Fatalf("config show prints a credential:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), `api_key_env = "DAYTONA_API_KEY"`) || !strings.Contains(out.String(), "vercel.tok") ||
		!strings.Contains(out.String(), "DAYTONA_API_KEY is set (its value is never shown)") {
		t.Fatalf("config show does not name the credential's file and variable:\n%s", out.String())
	}
	c = f.mustLoad(path, map[string]string{})
	if _, err := c.Secret(dt.APIKey); err == nil || !strings.Contains(err.Error(), "DAYTONA_API_KEY (api_key_env) is not set") {
		t.Fatalf("APIKey without the variable: %v", err)
	}
}
