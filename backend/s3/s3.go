package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"lifeboat/backend"
)

// Addressing is how requests name the bucket.
type Addressing string

// Addressing styles.
const (
	// AddressAuto: virtual-host style on Amazon's (and a few other
	// providers') endpoints, path style everywhere else.
	AddressAuto Addressing = "auto"
	// AddressPath: http://HOST/BUCKET/KEY, what most self-hosted servers
	// (MinIO, versitygw, Ceph) need.
	AddressPath Addressing = "path"
	// AddressVirtualHost: http://BUCKET.HOST/KEY.
	AddressVirtualHost Addressing = "virtual-host"
)

// Config says where the bucket is and how to reach it.
type Config struct {
	Location        Location
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string     // for temporary credentials; usually ""
	Region          string     // "" lets the client ask the server (GetBucketLocation)
	Addressing      Addressing // "" is AddressAuto
	// TempDir holds the temp files packs are written to before their
	// upload; "" is os.TempDir(). They are unlinked as they are created,
	// so a killed process leaves none behind.
	TempDir string
	// MaxRetries bounds the tries of one request (503 SlowDown, a reset
	// connection, ...); 0 is 6. Each retry waits longer (up to 1 s, with
	// jitter), honouring the context.
	MaxRetries int
	// Transport replaces the HTTP transport (tests); nil is a default
	// one with timeouts.
	Transport http.RoundTripper
}

// Backend is a repository in a bucket (under a prefix). Safe for
// concurrent use.
type Backend struct {
	client  *minio.Client
	tr      http.RoundTripper
	core    minio.Core
	loc     Location
	tempDir string
	tries   int // tries of a ranged GET whose body broke off
}

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.LoaderInto = (*Backend)(nil)
	_ backend.TempSaver  = (*Backend)(nil)
)

// ErrNoBucket: the location's bucket does not exist.
var ErrNoBucket = errors.New("bucket does not exist")

// Open connects to the bucket and checks that it exists and answers. It
// writes nothing. A bucket that is missing wraps ErrNoBucket; a refusal
// (bad credentials, no permission) wraps ErrRefused and so
// fs.ErrPermission; an unreachable server wraps backend.ErrUnavailable;
// missing credentials or a bad setting wrap ErrConfig. Without a region,
// the bucket's is asked first, with retries like every request.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	b, ok, err := openBucket(ctx, cfg, "open")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("s3: open %s: %w: create bucket %q (or let `lifeboat init` create it), or check the location", b.loc, ErrNoBucket, b.loc.Bucket)
	}
	return b, nil
}

// Create opens the location for a new repository, creating the bucket
// when it does not exist (in cfg.Region). It refuses a location that
// already holds a config.
func Create(ctx context.Context, cfg Config) (*Backend, error) {
	b, ok, err := openBucket(ctx, cfg, "create")
	if err != nil {
		return nil, err
	}
	if !ok {
		err := b.client.MakeBucket(ctx, b.loc.Bucket, minio.MakeBucketOptions{Region: cfg.Region})
		if err != nil && !alreadyOwned(err) {
			return nil, b.fail("create bucket", nil, err)
		}
	}
	if _, err := b.Stat(ctx, backend.Handle{Type: backend.Config, Name: "config"}); err == nil {
		return nil, fmt.Errorf("s3: create %s: %w: a repository already exists there (config object present)", b.loc, backend.ErrExists)
	} else if !errors.Is(err, backend.ErrNotFound) {
		return nil, err
	}
	return b, nil
}

// openBucket makes the backend and asks whether its bucket exists.
func openBucket(ctx context.Context, cfg Config, op string) (*Backend, bool, error) {
	b, err := newBackend(cfg)
	if err != nil {
		return nil, false, err
	}
	if cfg.Region == "" {
		if err := b.lookupRegion(ctx); err != nil {
			return nil, false, b.fail(op, nil, err)
		}
	}
	ok, err := b.client.BucketExists(ctx, b.loc.Bucket)
	if err == nil && !ok {
		err = b.refusedAsMissing(ctx)
	}
	if err != nil {
		return nil, false, b.fail(op, nil, err)
	}
	return b, ok, nil
}

// refusedAsMissing tells a missing bucket from an unknown access key id
// after BucketExists said "missing": its HEAD answer has no body, so
// minio-go takes any 404 for NoSuchBucket, and versitygw answers a key id
// it does not know with 404 XAdminUserNotFound. A listing's answer names
// its code. It returns that refusal, or nil.
func (b *Backend) refusedAsMissing(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing after its first answer
	for obj := range b.client.ListObjects(ctx, b.loc.Bucket, minio.ListObjectsOptions{MaxKeys: 1}) {
		if obj.Err != nil && unknownAccessKey(minio.ToErrorResponse(obj.Err)) {
			return obj.Err
		}
		break
	}
	return nil
}

func alreadyOwned(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "BucketAlreadyOwnedByYou"
}

func newBackend(cfg Config) (*Backend, error) {
	loc := cfg.Location
	if loc.Bucket == "" || loc.Host == "" {
		return nil, configErrorf("s3: no bucket or host in the location")
	}
	if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
		return nil, configErrorf("s3: %s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or [repository] s3_access_key_id with s3_secret_access_key_file or s3_secret_access_key_env in the config", loc)
	}
	lookup := minio.BucketLookupAuto
	switch cfg.Addressing {
	case AddressAuto, "":
	case AddressPath:
		lookup = minio.BucketLookupPath
	case AddressVirtualHost:
		lookup = minio.BucketLookupDNS
	default:
		return nil, configErrorf("s3: addressing %q: want auto, path or virtual-host", cfg.Addressing)
	}
	tr := cfg.Transport
	if tr == nil {
		tr = defaultTransport()
	}
	retries := cfg.MaxRetries
	if retries <= 0 {
		retries = 6
	}
	client, err := minio.New(loc.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken),
		Secure:       loc.Secure,
		Region:       cfg.Region,
		BucketLookup: lookup,
		Transport:    tr,
		MaxRetries:   retries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: %s: %w", loc, err)
	}
	client.SetAppInfo("lifeboat", "1")
	dir := cfg.TempDir
	if dir == "" {
		dir = os.TempDir()
	}
	return &Backend{client: client, tr: tr, core: minio.Core{Client: client}, loc: loc, tempDir: dir, tries: retries}, nil
}

// defaultTransport is http.DefaultTransport's setup with a bound on
// waiting for a response's headers, so a server that accepted a request
// and went silent fails the try (and it is retried) instead of hanging.
func defaultTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = 2 * time.Minute
	t.MaxIdleConnsPerHost = 16
	return t
}

// Location returns the repository's location (never credentials).
func (b *Backend) Location() string { return b.loc.String() }

// Close drops idle connections.
func (b *Backend) Close() error {
	if t, ok := b.tr.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return nil
}

// dir is the key prefix of type t's objects, ending in "/".
func (b *Backend) dir(t backend.FileType) string {
	return path.Join(b.loc.Prefix, string(t)) + "/"
}

// key maps a valid handle to its object key. Callers check h.Valid first.
func (b *Backend) key(h backend.Handle) string {
	switch h.Type {
	case backend.Config:
		return path.Join(b.loc.Prefix, "config")
	case backend.Pack:
		return b.dir(h.Type) + h.Name[:2] + "/" + h.Name
	default:
		return b.dir(h.Type) + h.Name
	}
}

// check validates h and ctx, the entry test of every handle method.
func check(ctx context.Context, op string, h backend.Handle) error {
	if err := h.Valid(); err != nil {
		return fmt.Errorf("s3: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3: %s %s: %w", op, h, err)
	}
	return nil
}

// name gives h's name as Stat and List report it.
func name(h backend.Handle) string {
	if h.Type == backend.Config {
		return "config"
	}
	return h.Name
}

// trimmed drops a trailing "/" (of dir) for messages.
func trimmed(s string) string { return strings.TrimSuffix(s, "/") }
