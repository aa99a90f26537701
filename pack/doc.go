// Package pack reads and writes pack files: many compressed, encrypted
// blobs of one tier followed by random padding, an encrypted header that
// lists them, and a fixed 16-byte trailer (docs/format.md, "Packs").
//
// Invariants:
//   - One tier per pack; every blob and the header are sealed with that
//     tier's key, and each blob's additional data binds its tier, type,
//     compression flag and id, so a blob swapped, moved or cut fails to open.
//   - The header hides blob lengths from anyone without the key: it is
//     encrypted, padded to a multiple of 4 KiB, and the whole pack is padded
//     to a Padmé length, so pack sizes leak O(log log n) bits.
//   - SealBlob decrypts and decompresses every blob it produces and compares
//     it with the input before returning it (guards against encoder bugs).
//   - Decoders never trust sizes read from storage: every offset and length
//     is checked against the pack before anything is allocated.
package pack
