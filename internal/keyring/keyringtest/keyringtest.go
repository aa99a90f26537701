//go:build linux

// Package keyringtest reads the user keyring for the tests of the key
// cache (internal/keyring, and the CLI's).
package keyringtest

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Require skips t where this process cannot use the kernel keyring.
func Require(t testing.TB) {
	t.Helper()
	if _, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, true); err != nil {
		t.Skip("the kernel keyring is not available to this process (no keyrings, or a seccomp filter refuses them)")
	}
}

// Entry returns the /proc/keys fields of the user key named name (ID,
// flags, usage, timeout, permissions, uid, gid, type, "name:", size), or
// nil when there is none.
func Entry(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open("/proc/keys")
	if err != nil {
		t.Skipf("no /proc/keys: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 10 && fields[7] == "user" && fields[8] == name+":" {
			return fields
		}
	}
	return nil
}

// Remove drops the user keyring entry named name, if there is one.
func Remove(name string) {
	if id, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", name, 0); err == nil {
		_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
	}
}
