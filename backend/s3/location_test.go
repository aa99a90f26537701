package s3

import (
	"errors"
	"strings"
	"testing"
)

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Location
	}{
		{"s3:https://s3.example.com/bucket", Location{Secure: true, Host: "s3.example.com", Bucket: "bucket"}},
		{"s3:https://s3.example.com:9000/bucket/", Location{Secure: true, Host: "s3.example.com:9000", Bucket: "bucket"}},
		{"s3:http://127.0.0.1:7070/b-1/team/repo", Location{Host: "127.0.0.1:7070", Bucket: "b-1", Prefix: "team/repo"}},
		{"s3:http://[::1]:7070/bucket/p", Location{Host: "[::1]:7070", Bucket: "bucket", Prefix: "p"}},
	} {
		got, err := ParseLocation(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLocation(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if again, err := ParseLocation(got.String()); err != nil || again != got {
			t.Errorf("ParseLocation(%q.String()) = %+v, %v", tc.in, again, err)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"/srv/repo", "not an S3 location"},
		{"s3:ftp://host/bucket", `scheme "ftp"`},
		{"s3:https:///bucket", "no host"},
		{"s3:https://host", "no bucket"},
		{"s3:https://host/", "no bucket"},
		{"s3:https://host/Bad_Bucket", "bucket"},
		{"s3:https://host/bucket/a//b", "empty"},
		{"s3:https://host/bucket/../x", `".."`},
		{"s3:https://host/bucket?x=1", "query"},
		{"s3:https://AKID:hunter2@host/bucket", "credentials do not belong"},
		{"s3:https://AKID:hunter2@host:bad/bucket", "credentials do not belong"},
		{"s3:AKID:hunter2@host/bucket", "credentials do not belong"},
		{"s3:https:AKID:hunter2@host/bucket", "credentials do not belong"},
		// A secret holding "/" ends the authority before the @; any @
		// is refused, so no part of it reaches a message.
		{"s3:https://AKID:hun/ter2@host/bucket", "credentials do not belong"},
		{"s3:https://AKID:12/hunter2@host/bucket", "credentials do not belong"},
		{"s3:https://AKID:123/hun/ter2@host/bucket", "credentials do not belong"},
		{"s3:https:/AKID:hunter2@host/bucket", "credentials do not belong"},
		{"s3:https://host/bucket/team@corp/repo", "an @ anywhere in it is refused"},
	} {
		_, err := ParseLocation(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, ErrConfig) {
			t.Errorf("ParseLocation(%q): %v, want an ErrConfig with %q", tc.in, err, tc.msg)
		}
		if err != nil && (strings.Contains(err.Error(), "hun") || strings.Contains(err.Error(), "ter2") || strings.Contains(err.Error(), "AKID")) {
			t.Errorf("ParseLocation(%q) repeats the credentials: %v", tc.in, err)
		}
		if r := Redact(tc.in); strings.Contains(r, "hun") || strings.Contains(r, "AKID") {
			t.Errorf("Redact(%q) = %q", tc.in, r)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"s3:https://host/bucket/p":              "s3:https://host/bucket/p",
		"s3:https://host/bucket/team@corp/repo": "s3:https://***@corp/repo", // refused: whatever is before an @ may be a secret
		"s3:https://K:S/x@host/bucket":          "s3:https://***@host/bucket",
		"s3:K:S@host/bucket":                    "s3:***@host/bucket",
		"s3:https://a@b:S@host/bucket?x":        "s3:https://***@host/bucket?x",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
