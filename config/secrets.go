package config

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

func (c *Config) lookup(name string) (string, bool) {
	if c.env == nil {
		return "", false
	}
	return c.env(name)
}

// Password reads the repository password: the content of password_file
// without its final newline, or the value of the environment variable
// password_env. Errors name the file or the variable, never the content.
func (c *Config) Password() ([]byte, error) {
	if f := c.Repository.PasswordFile; f != "" {
		return readSecretFile(f, "repository password file", "repository.password_file")
	}
	name := c.Repository.PasswordEnv
	v, ok := c.lookup(name)
	switch {
	case name == "":
		return nil, fmt.Errorf("no repository password: set repository.password_file or repository.password_env")
	case !ok:
		return nil, fmt.Errorf("the environment variable %s (repository.password_env) is not set", name)
	case v == "":
		return nil, fmt.Errorf("the environment variable %s (repository.password_env) is empty", name)
	}
	return []byte(v), nil
}

// S3SecretAccessKey reads the S3 secret access key: the content of
// s3_secret_access_key_file without its final newline, or the value of
// the variable s3_secret_access_key_env names. Errors name the file or
// the variable, never the content.
func (c *Config) S3SecretAccessKey() (string, error) {
	s := c.Repository.S3
	if f := s.SecretFile; f != "" {
		b, err := readSecretFile(f, "S3 secret access key file", "repository.s3_secret_access_key_file")
		return string(b), err
	}
	v, ok := c.lookup(s.SecretEnv)
	switch {
	case s.SecretEnv == "":
		return "", fmt.Errorf("no S3 secret access key: set repository.s3_secret_access_key_file or repository.s3_secret_access_key_env")
	case !ok || v == "":
		return "", fmt.Errorf("the environment variable %s (repository.s3_secret_access_key_env) holding the S3 secret access key is not set", s.SecretEnv)
	}
	return v, nil
}

// secretAlternative returns, for an unknown key that looks like an inline
// secret (password, token, key, ...), the keys to give it by instead.
func secretAlternative(path []string) (string, bool) {
	k := strings.ToLower(path[len(path)-1])
	secret := false
	switch k {
	case "password", "passwd", "pass", "passphrase", "token", "secret", "key", "private_key", "api_key",
		"secret_key", "access_key", "bearer_token", "client_secret":
		secret = true
	default:
		for _, suffix := range []string{"_password", "_passphrase", "_token", "_secret", "_secret_key", "_secret_access_key"} {
			secret = secret || strings.HasSuffix(k, suffix)
		}
	}
	if !secret {
		return "", false
	}
	switch path[0] {
	case "server":
		return "file (token_file for the token CLI clients send, tls_key for the TLS key)", true
	case "providers":
		return "file (key_file for an SSH provider's private key; api_key_file, or api_key_env naming an environment variable, for an e2b, vercel, " +
			"daytona or cloudflare provider's credential; token_file or token_env for a managed-agents provider's token)", true
	case "repository":
		if strings.HasPrefix(k, "s3_") {
			return "file (s3_secret_access_key_file) or environment variable name (s3_secret_access_key_env)", true
		}
		return "file (password_file) or environment variable name (password_env)", true
	}
	if len(path) == 1 {
		return "file ([repository] password_file) or environment variable name ([repository] password_env)", true
	}
	return "file path or environment variable name", true
}

// StatePassword reads the state database password: the content of
// [state] password_file without its final newline, the value of the
// variable password_env names, or nil when neither is set (the database
// needs none, or finds it in ~/.pgpass). Errors never hold the password.
func (c *Config) StatePassword() ([]byte, error) {
	if f := c.State.PasswordFile; f != "" {
		return readSecretFile(f, "state database password file", "state.password_file")
	}
	name := c.State.PasswordEnv
	if name == "" {
		return nil, nil
	}
	v, ok := c.lookup(name)
	switch {
	case !ok:
		return nil, fmt.Errorf("the environment variable %s (state.password_env) is not set", name)
	case v == "":
		return nil, fmt.Errorf("the environment variable %s (state.password_env) is empty", name)
	}
	return []byte(v), nil
}

// readSecretFile reads a secret file without its final newline; errors
// name the file (what, at key), never its content.
func readSecretFile(path, what, key string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the %s (%s): %w", what, key, err)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("the %s %s (%s) is empty", what, path, key)
	}
	return b, nil
}
