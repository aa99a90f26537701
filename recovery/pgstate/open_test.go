package pgstate

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"lifeboat/recovery/statedb"
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
