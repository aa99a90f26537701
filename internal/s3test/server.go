package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Version is the versitygw release the tests run against.
const Version = "v1.8.0"

// CachePath is where .ci/run installs the binary.
const CachePath = "/var/cache/lifeboat-ci/versitygw-" + Version + "/versitygw"

// Binary returns the versitygw binary, or "" when there is none.
func Binary() string {
	if p := os.Getenv("LIFEBOAT_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	if _, err := os.Stat(CachePath); err == nil {
		return CachePath
	}
	return ""
}

// Server is a running versitygw.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Dir  string // the directory it stores buckets in
	// Root credentials, made up for this server (so a request can only
	// succeed on it, not on another test's server that took the port).
	// Not secrets: the server lives for one test on 127.0.0.1.
	AccessKey, SecretKey string
	log                  *lockedWriter
}

// Endpoint is the server's URL.
func (s *Server) Endpoint() string { return "http://" + s.Addr }

// Env is the environment a lifeboat process needs to reach the server.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey}
}

// Start starts a versitygw for t and stops it when t ends. It skips t
// when there is no binary (fails under LIFEBOAT_CI=1).
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		msg := "versitygw not found: set LIFEBOAT_VERSITYGW, put it on PATH, or install it with `GOBIN=" + filepath.Dir(CachePath) +
			" go install github.com/versity/versitygw/cmd/versitygw@" + Version + "` (as .ci/run does)"
		if os.Getenv("LIFEBOAT_CI") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var last error
	for range 3 { // a free port can be taken between finding and binding it
		s, err := start(t, bin)
		if err == nil {
			return s
		}
		last = err
	}
	t.Fatalf("starting versitygw: %v", last)
	return nil
}

func start(t testing.TB, bin string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{Addr: addr, Dir: t.TempDir(), AccessKey: "lb" + randomHex(8), SecretKey: randomHex(20), log: &lockedWriter{w: &bytes.Buffer{}}}
	cmd := exec.Command(bin, "--port", addr, "posix", s.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	err = waitReady(addr, exited)
	if err == nil {
		err = s.ours()
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("%w (exit: %v); its output:\n%s", err, waitErr, s.output())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			// Its last lines only: it logs every request, and a long log
			// would push the test's own failure out of a CI log's tail.
			lines := strings.Split(strings.TrimRight(s.output(), "\n"), "\n")
			t.Logf("versitygw output, its last lines:\n%s", strings.Join(lines[max(0, len(lines)-10):], "\n"))
		}
	})
	return s, nil
}

// waitReady polls the server until it answers HTTP, it exits, or 30 s
// pass.
func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	c := &http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("versitygw exited before it answered")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw did not answer on %s within 30 s: %v", addr, err)
		}
	}
}

func (s *Server) output() string {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.log.w.String()
}

// ours checks that the server answering on Addr is this one: it accepts
// this server's made-up credentials.
func (s *Server) ours() error {
	c, err := s.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.ListBuckets(ctx); err != nil {
		return fmt.Errorf("the server on %s refused this server's credentials (another process took the port?): %w", s.Addr, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var bucketSeq atomic.Int64

// Client is a minio-go client of the server with the root credentials.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := s.client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *Server) client() (*minio.Client, error) {
	return minio.New(s.Addr, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
}

// NewBucket creates an empty bucket with a name unique in this process.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("lb-%d-%d", os.Getpid()%100000, bucketSeq.Add(1))
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	return name
}

// Location is the repository location of prefix (may be "") in bucket on
// this server.
func (s *Server) Location(bucket, prefix string) string {
	return "s3:" + s.Endpoint() + "/" + strings.TrimSuffix(bucket+"/"+prefix, "/")
}
