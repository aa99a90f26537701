package location

import (
	"context"
	"strings"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/backend/s3"
)

// S3 are the settings of S3 locations; local locations ignore them.
// Empty fields are filled from the environment by FromEnv.
type S3 struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	Region          string
	Addressing      s3.Addressing // "" is auto
	TempDir         string
	MaxRetries      int // 0: the backend's default
}

// FromEnv fills the fields left empty from the standard variables:
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION
// (or AWS_DEFAULT_REGION), and Lifeboat's LIFEBOAT_REPOSITORY_S3_ADDRESSING
// and LIFEBOAT_REPOSITORY_S3_TEMP_DIR. The secret key is read from the
// environment only together with the key id it belongs to.
func (o *S3) FromEnv(lookup func(string) (string, bool)) {
	get := func(names ...string) string {
		for _, n := range names {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	if o.AccessKeyID == "" {
		o.AccessKeyID = get("AWS_ACCESS_KEY_ID")
		if o.SecretAccessKey == "" {
			o.SecretAccessKey = get("AWS_SECRET_ACCESS_KEY")
		}
		if o.SessionToken == "" {
			o.SessionToken = get("AWS_SESSION_TOKEN")
		}
	}
	if o.Region == "" {
		o.Region = get("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if o.Addressing == "" {
		o.Addressing = s3.Addressing(get("LIFEBOAT_REPOSITORY_S3_ADDRESSING"))
	}
	if o.TempDir == "" {
		o.TempDir = get("LIFEBOAT_REPOSITORY_S3_TEMP_DIR")
	}
}

// IsS3 reports whether loc names an S3 repository.
func IsS3(loc string) bool { return s3.IsLocation(loc) }

// Open opens the repository at loc. It writes nothing. Local errors are
// those of local.Open; S3 errors those of s3.Open, after a location that
// does not parse (s3.ErrConfig, its message without credentials).
func Open(ctx context.Context, loc string, o S3) (backend.Backend, error) {
	if !IsS3(loc) {
		return local.Open(loc)
	}
	cfg, err := o.config(loc)
	if err != nil {
		return nil, err
	}
	return s3.Open(ctx, cfg)
}

// Create prepares loc for a new repository: a local directory tree, or a
// bucket (created when missing). It refuses a location that holds a
// repository's config already (backend.ErrExists for S3).
func Create(ctx context.Context, loc string, o S3) (backend.Backend, error) {
	if !IsS3(loc) {
		return local.Create(loc)
	}
	cfg, err := o.config(loc)
	if err != nil {
		return nil, err
	}
	return s3.Create(ctx, cfg)
}

func (o S3) config(loc string) (s3.Config, error) {
	l, err := s3.ParseLocation(loc)
	if err != nil {
		return s3.Config{}, err
	}
	return s3.Config{Location: l, AccessKeyID: o.AccessKeyID, SecretAccessKey: o.SecretAccessKey, SessionToken: o.SessionToken,
		Region: o.Region, Addressing: o.Addressing, TempDir: o.TempDir, MaxRetries: o.MaxRetries}, nil
}
