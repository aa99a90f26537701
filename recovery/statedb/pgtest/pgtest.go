// Package pgtest gives tests a PostgreSQL database: a fresh database per
// test on one private cluster per test binary (Debian's postgresql 15,
// initdb and pg_ctl run as the postgres user when the tests run as root,
// listening on 127.0.0.1 and a free port, its sockets in its own temporary
// directory), or on the server env LIFEBOAT_PG_URL names. Call Stop when
// the tests end (TestMain). Without PostgreSQL, tests skip with a message
// saying so; with LIFEBOAT_CI=1 they fail instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names an existing server to use instead of a private cluster: a
// URL whose user may create databases.
const EnvURL = "LIFEBOAT_PG_URL"

// BinDir is where Debian installs PostgreSQL 15's programs.
const BinDir = "/usr/lib/postgresql/15/bin"

var (
	once     sync.Once
	admin    string // URL of the maintenance database
	dir      string // the private cluster's directory; "" when none runs
	setupErr error
)

// Available reports whether a server can be had (without starting one).
func Available() bool {
	if os.Getenv(EnvURL) != "" {
		return true
	}
	_, err := os.Stat(filepath.Join(BinDir, "pg_ctl"))
	return err == nil
}

// URL returns the URL of a new, empty database for t, dropped when t ends.
// It skips t when no PostgreSQL is installed (fails with LIFEBOAT_CI=1).
func URL(t testing.TB) string {
	t.Helper()
	once.Do(func() { admin, setupErr = start() })
	if setupErr != nil {
		if os.Getenv("LIFEBOAT_CI") == "1" {
			t.Fatalf("PostgreSQL is required in CI: %v", setupErr)
		}
		t.Skipf("PostgreSQL not available (%v); install postgresql-15 or set %s", setupErr, EnvURL)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connecting to the test PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = conn.Close(ctx)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	return u.String()
}

// Stop stops the private cluster this process started, if any, and
// removes its directory.
func Stop() {
	if dir == "" {
		return
	}
	_ = asPostgres(filepath.Join(BinDir, "pg_ctl"), "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop").Run()
	_ = os.RemoveAll(dir)
	dir = ""
}

func start() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	if _, err := os.Stat(filepath.Join(BinDir, "pg_ctl")); err != nil {
		return "", fmt.Errorf("%s not found", filepath.Join(BinDir, "pg_ctl"))
	}
	d, err := os.MkdirTemp("", "lifeboat-pg-")
	if err != nil {
		return "", err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(d)
			return "", fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(d, uid, gid); err != nil {
			_ = os.RemoveAll(d)
			return "", err
		}
	}
	dir = d
	data := filepath.Join(d, "data")
	if out, err := asPostgres(filepath.Join(BinDir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
		"--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		Stop()
		return "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		Stop()
		return "", err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, d)
	if out, err := asPostgres(filepath.Join(BinDir, "pg_ctl"), "-D", data, "-l", filepath.Join(d, "log"), "-w", "-t", "60",
		"-o", opts, "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(d, "log"))
		Stop()
		return "", fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	reap(d)
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), nil
}

// reap starts a watchdog that stops the cluster in d and removes d once
// this process is gone, however it ends (a test binary killed at its
// timeout runs no TestMain code).
func reap(d string) {
	stop := strings.Join(asPostgres(filepath.Join(BinDir, "pg_ctl"), "-D", filepath.Join(d, "data"), "-m", "immediate", "-w", "stop").Args, " ")
	w := exec.Command("sh", "-c", `while kill -0 "$1" 2>/dev/null; do sleep 1; done; `+stop+` >/dev/null 2>&1; rm -rf "$2"`,
		"pgtest-reaper", strconv.Itoa(os.Getpid()), d)
	w.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if w.Start() == nil {
		_ = w.Process.Release()
	}
}

// asPostgres runs a program as the postgres user when this process is
// root (PostgreSQL refuses to run as root), else as this user.
func asPostgres(prog string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	}
	return exec.Command(prog, args...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// EndLockSessions ends, as a dropped connection would, every other
// session of the database at url that holds an advisory lock (a
// workspace's lock, for one), and returns how many it ended. It returns
// once they are gone and their locks free.
func EndLockSessions(t testing.TB, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to the test PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM (
		SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) s`).Scan(&n); err != nil {
		t.Fatalf("ending the sessions that hold advisory locks: %v", err)
	}
	return n
}
