package s3

import (
	"errors"
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

// ErrConfig: the repository is named or set up wrong: a location that
// does not parse or holds credentials, no credentials, an unknown
// addressing style. Not a missing repository: the message says what is
// wrong and what to do.
var ErrConfig = errors.New("invalid S3 repository settings")

// configError is an ErrConfig with its own message.
type configError struct{ msg string }

func (e configError) Error() string        { return e.msg }
func (e configError) Is(target error) bool { return target == ErrConfig }

func configErrorf(format string, args ...any) error {
	return configError{fmt.Sprintf(format, args...)}
}

// ParseLocation parses s3:https://HOST[:PORT]/BUCKET[/PREFIX] (or
// s3:http://..., for test servers). Its errors wrap ErrConfig and say what
// a location looks like; a location with credentials in it is refused,
// since locations are printed, and no error repeats them (Redact).
func ParseLocation(s string) (Location, error) {
	const want = "want s3:https://HOST[:PORT]/BUCKET[/PREFIX]"
	if !IsLocation(s) {
		return Location{}, configErrorf("repository location %q is not an S3 location: %s", masked(s), want)
	}
	rest := strings.TrimPrefix(s, Scheme)
	if hasUserinfo(rest) {
		// Not echoed: what is before the @ may be a secret.
		return Location{}, configErrorf("repository location: credentials do not belong in the location (it is printed; an @ anywhere in it is refused); give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the config file")
	}
	shown := masked(s)
	u, err := url.Parse(rest)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its text quotes the URL
			err = ue.Err
		}
		return Location{}, configErrorf("repository location %q: %v; %s", shown, err, want)
	}
	var l Location
	switch u.Scheme {
	case "https":
		l.Secure = true
	case "http":
	default:
		return Location{}, configErrorf("repository location %q: scheme %q; %s (or s3:http:// for a test server)", shown, u.Scheme, want)
	}
	if u.Host == "" || u.Hostname() == "" {
		return Location{}, configErrorf("repository location %q: no host; %s", shown, want)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Location{}, configErrorf("repository location %q: a query or fragment has no meaning here; %s", shown, want)
	}
	l.Host = u.Host
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	l.Bucket = parts[0]
	if l.Bucket == "" {
		return Location{}, configErrorf("repository location %q: no bucket; %s", shown, want)
	}
	if err := s3utils.CheckValidBucketNameStrict(l.Bucket); err != nil {
		if shown != s { // the bucket may be a piece of a secret
			return Location{}, configErrorf("repository location %q: not a valid bucket name; %s", shown, want)
		}
		return Location{}, configErrorf("repository location %q: bucket %q: %v", shown, l.Bucket, err)
	}
	for _, p := range parts[1:] {
		if p == "" || p == "." || p == ".." {
			return Location{}, configErrorf("repository location %q: the prefix has an empty, \".\" or \"..\" part", shown)
		}
	}
	l.Prefix = strings.Join(parts[1:], "/")
	return l, nil
}

// hasUserinfo reports whether rest (a location after "s3:") may hold
// credentials: an @ anywhere. Not only in the authority: secret keys
// often hold a "/", which would end the authority early and leave part of
// the secret in the host or the path. A prefix with an @ is refused too.
func hasUserinfo(rest string) bool {
	return strings.Contains(rest, "@")
}

// Redact gives s for messages: a location that parses in its canonical
// form, any other masked. A location without "@" is returned as it is.
func Redact(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	if l, err := ParseLocation(s); err == nil {
		return l.String()
	}
	return masked(s)
}

// masked is s with everything up to its last "@" after the scheme
// replaced by "***" (a secret may hold "/", which puts the @ past the
// authority); s when it has no "@".
func masked(s string) string {
	i := strings.LastIndex(s, "@")
	if i < 0 {
		return s
	}
	head := ""
	if j := strings.Index(s[:i], "://"); j >= 0 {
		head = s[:j+3]
	} else if IsLocation(s) {
		head = Scheme
	}
	return head + "***" + s[i:]
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
