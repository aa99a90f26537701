package s3

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Scheme starts every S3 repository location.
const Scheme = "s3:"

// Location is a parsed s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX].
type Location struct {
	Secure bool   // https
	Host   string // host[:port]
	Bucket string
	Prefix string // without leading or trailing slash; "" for the bucket's root
}

// IsLocation reports whether s names an S3 repository (starts with "s3:").
func IsLocation(s string) bool { return strings.HasPrefix(s, Scheme) }

// ParseLocation parses s3:https://HOST[:PORT]/BUCKET[/PREFIX] (or
// s3:http://..., for test servers). Its errors say what a location looks
// like; a location with credentials in it is refused, since locations are
// printed.
func ParseLocation(s string) (Location, error) {
	const want = "want s3:https://HOST[:PORT]/BUCKET[/PREFIX]"
	if !IsLocation(s) {
		return Location{}, fmt.Errorf("repository location %q is not an S3 location: %s", s, want)
	}
	rest := strings.TrimPrefix(s, Scheme)
	if _, after, ok := strings.Cut(rest, "://"); ok {
		if authority, _, _ := strings.Cut(after, "/"); strings.Contains(authority, "@") {
			// Not echoed: what is before the @ may be a secret.
			return Location{}, fmt.Errorf("repository location: credentials do not belong in the location (it is printed); give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the config file")
		}
	}
	u, err := url.Parse(rest)
	if err != nil {
		return Location{}, fmt.Errorf("repository location %q: %v; %s", s, err, want)
	}
	var l Location
	switch u.Scheme {
	case "https":
		l.Secure = true
	case "http":
	default:
		return Location{}, fmt.Errorf("repository location %q: scheme %q; %s (or s3:http:// for a test server)", s, u.Scheme, want)
	}
	if u.Host == "" || u.Hostname() == "" {
		return Location{}, fmt.Errorf("repository location %q: no host; %s", s, want)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Location{}, fmt.Errorf("repository location %q: a query or fragment has no meaning here; %s", s, want)
	}
	l.Host = u.Host
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	l.Bucket = parts[0]
	if l.Bucket == "" {
		return Location{}, fmt.Errorf("repository location %q: no bucket; %s", s, want)
	}
	if err := s3utils.CheckValidBucketNameStrict(l.Bucket); err != nil {
		return Location{}, fmt.Errorf("repository location %q: bucket %q: %v", s, l.Bucket, err)
	}
	for _, p := range parts[1:] {
		if p == "" || p == "." || p == ".." {
			return Location{}, fmt.Errorf("repository location %q: the prefix %q has an empty, \".\" or \"..\" part", s, strings.Join(parts[1:], "/"))
		}
	}
	l.Prefix = strings.Join(parts[1:], "/")
	return l, nil
}

// String gives the location back in its canonical form.
func (l Location) String() string {
	scheme := "http"
	if l.Secure {
		scheme = "https"
	}
	s := Scheme + scheme + "://" + l.Host + "/" + l.Bucket
	if l.Prefix != "" {
		s += "/" + l.Prefix
	}
	return s
}
