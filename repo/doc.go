// Package repo is the Repository: a backend, the keys a password unlocked,
// the local index and the packers behind one API that every higher package
// uses to save and load blobs and objects. It is the only door to packs:
// capture saves through SaveStream (cut by chunkers the repository keeps,
// with the tier's secret polynomial), restore and prune's repack read
// through StreamPack, and capture's file cache is the FileCache handle.
//
// Invariants:
//   - Write order: packs, then the index objects that name them, then the
//     objects that reference blobs (snapshots). An index object is written
//     only after every pack it lists is durable, and the local index learns
//     of a blob only from an index object that was saved.
//   - The config is written last at init: a repository exists once its
//     config does.
//   - Every object read is checked against its name (BLAKE3 of its bytes)
//     and every blob against its id (keyed BLAKE3 of its plaintext).
//   - SaveBlob, LoadBlob and Flush are safe for many goroutines at once;
//     pack uploads run in parallel up to Options.Uploads.
package repo
