package httpapi

import (
	"net/http"
	"testing"
	"time"
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
