// Package config reads the one configuration file of `lifeboat serve`
// (TOML), layers the environment and command-line overrides on it
// (flag > environment > file > default), validates every key and returns
// typed values.
//
// Invariants:
//   - Every error names where the bad value came from: the file and line,
//     the environment variable, or the --set flag, and the key. All errors
//     found are reported together (Errors), not just the first.
//   - Secrets (the repository password, SSH keys, tokens) are named only by
//     file path or environment variable name, never written inline. The
//     package checks that secret files exist and are readable but never
//     reads them, except Password, which reads the repository password on
//     request. Show never prints a secret.
//   - No global state: the environment is a function the caller passes.
package config
