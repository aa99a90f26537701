// Package snaptest holds the test helpers that the tests of snapshot,
// snapshot/capture and snapshot/restore share: a small repository in a
// temp dir that builds snapshots by hand (Repo), a dump of a directory
// tree for exact comparison (Dump), and the repository and snapshot
// checkers run at the end of a test (Check). Tests only.
package snaptest
