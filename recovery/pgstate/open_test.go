package pgstate

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"lifeboat/recovery/statedb"
	"lifeboat/recovery/statedb/pgtest"
)

// A database that cannot be reached fails with statedb.ErrUnavailable,
// and no error or name holds the password, whether it came in the URL or
// apart.
func TestOpenErrorsHideThePassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	const pw = "pw-never-shown-4711"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range []Options{
		{URL: "postgres://lifeboat:" + pw + "@" + addr + "/state?sslmode=disable&connect_timeout=5"},
		{URL: "postgres://lifeboat@" + addr + "/state?sslmode=disable&connect_timeout=5", Password: pw},
		{URL: "postgres://lifeboat@" + addr + "/state?sslmode=disable&connect_timeout=5&password=" + pw},
	} {
		_, err := Open(ctx, o)
		if !errors.Is(err, statedb.ErrUnavailable) || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), addr) {
			t.Errorf("Open: %v", err)
		}
	}
	if _, err := Open(ctx, Options{URL: "postgres://lifeboat:" + pw + "@[::1/x"}); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("a URL that does not parse: %v", err)
	}
	if got := Redact("postgres://u:" + pw + "@h:5432/db?password=" + pw + "&sslmode=require"); strings.Contains(got, pw) {
		t.Errorf("Redact = %s", got)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// A database that is not there says to create it; the connections of an
// open store are named in pg_stat_activity ("lifeboat HOST"), unless the
// URL names them itself.
func TestOpenNamesMissingDatabaseAndItsConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(pgtest.URL(t))
	must(t, err)
	missing := *u
	missing.Path = "/no_such_database"
	if _, err := Open(ctx, Options{URL: missing.String()}); !errors.Is(err, statedb.ErrUnavailable) || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "CREATE DATABASE") {
		t.Fatalf("Open of a missing database: %v", err)
	}
	host, _ := os.Hostname()
	named := *u
	q := named.Query()
	q.Set("application_name", "fleet-a")
	named.RawQuery = q.Encode()
	for _, c := range []struct{ url, want string }{{u.String(), strings.TrimSpace("lifeboat " + host)}, {named.String(), "fleet-a"}} {
		db, err := Open(ctx, Options{URL: c.url})
		must(t, err)
		var got string
		err = db.pool.QueryRow(ctx, `SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&got)
		db.Close()
		if err != nil || got != c.want {
			t.Fatalf("application_name %q (%v), want %q", got, err, c.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
