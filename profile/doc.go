// Package profile finds browser profiles (Chromium family and Firefox) in a
// workspace and makes them safe to capture and restore as a snapshot's
// sensitive part: the keep/skip/never rule table (rules.go, mirrored in
// docs/profiles.md), running and paused browser detection (running.go,
// proctree.go), SQLite WAL checkpoints before capture, replay of captured
// side files, and validation and Chromium crash-state reset of a restored
// profile in staging. The deterministic Chromium session fixture its tests
// use is package profile/fixture.
//
// Invariants:
//   - Symlinks are never followed: not in discovery, not to a profile, not
//     inside one.
//   - A profile whose browser is running is never captured
//     (ErrBrowserRunning). One whose browser is paused (its process tree
//     stopped) is captured without being opened, each SQLite database
//     with its -wal and -journal; one whose browser is not running is
//     checkpointed first and captured without side files. Lock files
//     (SingletonLock, lock, .parentlock, ...) are never captured or
//     restored.
//   - Nothing here logs or returns the content of a profile file: errors
//     and problems name paths only.
//
// profile/ does not import snapshot/ (same layer); cmd/lifeboat passes
// Profile.CaptureFilter to snapshot as a capture filter and Validate as
// the restore validation callback.
package profile
