package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, "0": 0, "-3": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestParseRetryAfterCapped: a platform's wait is honoured up to
// MaxRetryAfter; a longer one (seconds or a date), and one too large for a
// time.Duration, is MaxRetryAfter, never negative or years away.
func TestParseRetryAfterCapped(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range []string{
		"86400", "99999999999", "9223372036854775807", "99999999999999999999",
		now.AddDate(10, 0, 0).Format(http.TimeFormat),
	} {
		if got := ParseRetryAfter(v, now); got != MaxRetryAfter {
			t.Errorf("ParseRetryAfter(%q) = %v, want the cap %v", v, got, MaxRetryAfter)
		}
	}
	if got := ParseRetryAfter("3599", now); got != 3599*time.Second {
		t.Errorf("ParseRetryAfter(3599) = %v, want it as sent", got)
	}
}

// TestNotFoundNeedsPlatformAnswer: a 404 or 410 the caller would take as
// "gone" counts only when it carries the platform's JSON error; a 404
// page from a proxy or a wrong base_url (HTML, plain text) is an
// unavailable error, never passed back as proof, through Do and Send.
func TestNotFoundNeedsPlatformAnswer(t *testing.T) {
	ctype, status := "", 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		if strings.Contains(ctype, "json") || ctype == "text/plain; charset=utf-8" && status == 404 {
			_, _ = w.Write([]byte(`{"code":404,"message":"sandbox not found"}`))
		} else {
			_, _ = w.Write([]byte("<html><body>404 Not Found</body></html>"))
		}
	}))
	t.Cleanup(srv.Close)
	c := &Client{Provider: "fake", BaseURL: srv.URL, Table: StatusTable{404: providers.KindConflict}}
	ctx := context.Background()
	for _, tc := range []struct {
		ctype  string
		status int
		pass   bool
	}{
		{"application/json", 404, true},
		{"application/json; charset=utf-8", 410, true},
		{"application/problem+json", 404, true},
		{"text/plain; charset=utf-8", 404, true}, // a JSON body under another type
		{"text/html", 404, false},
		{"text/plain; charset=utf-8", 410, false},
		{"", 404, false},
	} {
		ctype, status = tc.ctype, tc.status
		got, err := c.Do(ctx, "inspect", "sb1", http.MethodGet, "/sandboxes/sb1", nil, nil, 404, 410)
		resp, serr := c.Send(ctx, Request{Op: "inspect", Instance: "sb1", Method: http.MethodGet, URL: srv.URL + "/x", Pass: []int{404, 410}})
		if serr == nil {
			resp.Body.Close()
		}
		if tc.pass {
			if err != nil || got != tc.status || serr != nil {
				t.Errorf("%d %q: Do = %d, %v; Send error %v; want it passed back", tc.status, tc.ctype, got, err, serr)
			}
			continue
		}
		for what, e := range map[string]error{"Do": err, "Send": serr} {
			if providers.KindOf(e) != providers.KindUnavailable || !strings.Contains(e.Error(), "not the platform's") {
				t.Errorf("%d %q: %s = %v, want unavailable (not the platform's answer)", tc.status, tc.ctype, what, e)
			}
		}
	}
}

// TestStatuses: an adapter's table keeps the statuses every platform
// shares, takes its own over them, and leaves the next adapter's alone.
func TestStatuses(t *testing.T) {
	toolbox := Statuses(StatusTable{400: providers.KindConflict, 410: providers.KindConflict})
	plain := Statuses(nil)
	for _, c := range []struct {
		t      StatusTable
		status int
		want   providers.Kind
	}{
		{toolbox, 400, providers.KindConflict},
		{toolbox, 410, providers.KindConflict},
		{toolbox, 401, providers.KindUnauthorized},
		{toolbox, 429, providers.KindRateLimited},
		{plain, 400, providers.KindInvalid},
		{plain, 403, providers.KindUnauthorized},
		{plain, 404, providers.KindConflict},
		{plain, 409, providers.KindConflict},
		{plain, 410, providers.KindInvalid},
		{plain, 502, providers.KindUnavailable},
	} {
		if got := c.t.Kind(c.status); got != c.want {
			t.Errorf("Kind(%d) = %s, want %s", c.status, got, c.want)
		}
	}
}
