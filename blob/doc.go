// Package blob holds the vocabulary every layer of Lifeboat shares: 32-byte
// object and blob IDs, blob types and key tiers, and the check every
// decoder applies to a stored time (CheckTime).
//
// Invariants: it imports nothing from Lifeboat, so every other package may
// use it; the numeric values of Type and Tier are part of repository format
// v1 (docs/format.md) and never change.
package blob
