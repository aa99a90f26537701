// Package chunk cuts byte streams into content-defined chunks (Rabin
// fingerprints over a 64-byte window) with a secret, per-repository,
// per-tier polynomial. The cuts are restic/chunker's for the same
// polynomial and sizes, and the tests check them against it, but the loop
// that finds them is this package's own (rabin.go): it runs four
// fingerprints at once and reads straight into the chunk's buffer, 2.3
// times restic/chunker's speed on one core (BenchmarkChunk, 420 to 980
// MB/s), which took the chunker from 13% to 5% of a first capture's CPU.
//
// Sizes (Params): minimum 256 KiB, maximum 8 MiB, cut mask of 19 bits, so
// the mean chunk is about 768 KiB (min + 2^19). Against restic's 512 KiB /
// 1 MiB / 8 MiB this chunks ~15% faster (the chunker skips the minimum
// without hashing) and dedups a small edit in a smaller neighbourhood, while
// keeping about 1.4 million chunks per TiB, which the bbolt index holds
// without growing memory.
//
// Invariants: the same polynomial and Params always give the same cuts; a
// stream shorter than the minimum is one chunk; the polynomial never leaves
// the encrypted config. Chunk ids are keyed BLAKE3 (crypt.TierKeys.BlobID).
package chunk
