package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const s3Repo = `[repository]
location = "s3:https://s3.example.com:9000/backups/lifeboat"
password_file = "{{dir}}/repo.pw"
s3_access_key_id = "AKIDEXAMPLE"
{{secret}}
s3_region = "eu-west-1"
s3_addressing = "path"

[state]
dir = "{{dir}}/state"

[server]
tokens_file = "{{dir}}/tokens"
`

// TestS3Repository: the s3_* keys load, the secret comes from its file or
// variable, and config show names the file or variable, never the secret.
func TestS3Repository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const fileSecret, envSecret = "wJalrXUtnFEMI-from-file", "wJalrXUtnFEMI-from-env"
	if err := os.WriteFile(filepath.Join(f.dir, "s3.secret"), []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, secret string
		env          map[string]string
		want         string
		show         []string
	}{
		{"file", `s3_secret_access_key_file = "{{dir}}/s3.secret"`, map[string]string{"AWS_SECRET_ACCESS_KEY": envSecret}, fileSecret,
			[]string{"s3.secret", "its content is never shown", "not used: s3_secret_access_key_file is set"}},
		{"named variable", `s3_secret_access_key_env = "S3_SECRET"`, map[string]string{"S3_SECRET": envSecret}, envSecret,
			[]string{`s3_secret_access_key_env = "S3_SECRET"`, "S3_SECRET is set (its value is never shown)"}},
		{"default variable", ``, map[string]string{"AWS_SECRET_ACCESS_KEY": envSecret}, envSecret,
			[]string{"AWS_SECRET_ACCESS_KEY is set (its value is never shown)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.mustLoad(f.write("lifeboat.toml", strings.Replace(s3Repo, "{{secret}}", tc.secret, 1)), tc.env)
			s := c.Repository.S3
			if s.AccessKeyID != "AKIDEXAMPLE" || s.Region != "eu-west-1" || s.Addressing != "path" {
				t.Errorf("S3 settings: %+v", s)
			}
			got, err := c.S3SecretAccessKey()
			if err != nil || got != tc.want {
				t.Errorf("S3SecretAccessKey: %q, %v; want %q", got, err, tc.want)
			}
			out := show(t, c)
			for _, secret := range []string{fileSecret, envSecret} {
				if strings.Contains(out, secret) {
					t.Errorf("config show prints the secret %q:\n%s", secret, out)
				}
			}
			for _, w := range tc.show {
				if !strings.Contains(out, w) {
					t.Errorf("config show lacks %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("credentials from the AWS variables", func(t *testing.T) {
		text := strings.Replace(strings.Replace(s3Repo, "{{secret}}", "", 1), `s3_access_key_id = "AKIDEXAMPLE"`, "", 1)
		c := f.mustLoad(f.write("lifeboat.toml", text), map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": envSecret})
		if c.Repository.S3.AccessKeyID != "AKIDENV" {
			t.Errorf("access key id %q, want AWS_ACCESS_KEY_ID's", c.Repository.S3.AccessKeyID)
		}
		if got, err := c.S3SecretAccessKey(); err != nil || got != envSecret {
			t.Errorf("S3SecretAccessKey: %q, %v", got, err)
		}
	})
	t.Run("variable unset", func(t *testing.T) {
		c := f.mustLoad(f.write("lifeboat.toml", strings.Replace(s3Repo, "{{secret}}", "", 1)), nil)
		if _, err := c.S3SecretAccessKey(); err == nil || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
			t.Errorf("S3SecretAccessKey with the variable unset: %v", err)
		}
	})
}

// TestS3Errors: a bad s3: location, two secret sources, no access key and
// an inline secret are reported at their line.
func TestS3Errors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		name, from, to string
		want           []wantErr
	}{
		{"no bucket", `s3:https://s3.example.com:9000/backups/lifeboat`, `s3:https://s3.example.com:9000/`,
			[]wantErr{{at: "location", key: "repository.location", msg: "no bucket"}}},
		{"credentials in the location", `s3:https://s3.example.com:9000/`, `s3:https://AKID:hunter2@s3.example.com:9000/`,
			[]wantErr{{at: "location", key: "repository.location", msg: "credentials do not belong in the location"}}},
		{"both secret sources", `{{secret}}`, "s3_secret_access_key_file = \"{{dir}}/repo.pw\"\ns3_secret_access_key_env = \"X\"",
			[]wantErr{{at: "s3_secret_access_key_env", key: "repository.s3_secret_access_key_env", msg: "both set"}}},
		{"no access key", `s3_access_key_id = "AKIDEXAMPLE"`, ``,
			[]wantErr{{at: "location", key: "repository.s3_access_key_id", msg: "needs credentials"}}},
		{"inline secret", `{{secret}}`, `s3_secret_access_key = "hunter2"`,
			[]wantErr{{at: "s3_secret_access_key", key: "repository.s3_secret_access_key", msg: "secrets are given by file (s3_secret_access_key_file) or environment variable name (s3_secret_access_key_env), never inline"}}},
		{"bad addressing", `s3_addressing = "path"`, `s3_addressing = "dns"`,
			[]wantErr{{at: "s3_addressing", key: "repository.s3_addressing", msg: "want one of auto, path, virtual-host"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(s3Repo, tc.from, tc.to, 1)
			text = strings.Replace(text, "{{secret}}", "", 1)
			path := f.write("lifeboat.toml", text)
			_, err := f.load(path, nil)
			checkErrors(t, err, path, text, tc.want)
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("an error repeats an inline secret:\n%v", err)
			}
		})
	}
}
