package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A request that gets no answer says what to check: the certificate when
// TLS refused the server's, else whether the server runs.
func TestClientSaysWhyNoAnswer(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	down := "http://" + l.Addr().String()
	must(t, l.Close())
	for _, c := range []struct{ url, want string }{
		{tlsSrv.URL, "TLS certificate is not trusted on this host"},
		{down, "is `lifeboat serve` running there?"},
	} {
		_, err := (&Client{BaseURL: c.url, Token: "t"}).Workspaces(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.url, err, c.want)
		}
	}
	// Trusted, but reached by a name the certificate does not hold.
	byName := strings.Replace(tlsSrv.URL, "127.0.0.1", "localhost", 1)
	_, err = (&Client{BaseURL: byName, Token: "t", HTTP: tlsSrv.Client()}).Workspaces(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not for this host name") {
		t.Errorf("%s: %v, want it to say the name is not the certificate's", byName, err)
	}
}
