// Package crypt holds Lifeboat's key hierarchy and its cryptographic
// primitives: per-tier master keys, XChaCha20-Poly1305 sealing with random
// nonces, keyed BLAKE3 blob ids, and password-wrapped key files (argon2id).
//
// Invariants:
//   - Each tier (workspace, sensitive) has its own independent random keys:
//     an encryption key and a blob-id key. A MasterKeys value that lacks a
//     tier holds no bytes of that tier's keys.
//   - Every Seal uses a fresh random 24-byte nonce; callers bind context
//     (object kind, tier, blob id) through the additional data.
//   - Keys and passwords never appear in errors, logs or String output.
package crypt
