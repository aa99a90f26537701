// Package s3test starts a real S3 server for tests: versitygw (v1.8.0,
// the first release whose conditional PUTs are atomic per key) on
// 127.0.0.1, a free port and a temp directory, stopped when the test ends.
//
// The binary is found in $LIFEBOAT_VERSITYGW, then on PATH, then in the
// CI cache (/var/cache/lifeboat-ci/versitygw-v1.8.0/versitygw, where
// .ci/run installs it). Without it the test is skipped, or fails when
// LIFEBOAT_CI=1.
package s3test
