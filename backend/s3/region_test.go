package s3

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
	"lifeboat/internal/s3test"
)

// blinkingServer accepts connections on 127.0.0.1 and resets the first
// resets of them (RST, as a server restarting would); later ones are
// piped to target ("" resets them all). It counts the connections.
type blinkingServer struct {
	Addr  string
	conns atomic.Int64
}

func startBlinking(t *testing.T, resets int64, target string) *blinkingServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &blinkingServer{Addr: l.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if n := s.conns.Add(1); target == "" || n <= resets {
				_ = c.(*net.TCPConn).SetLinger(0)
				c.Close()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pipe(t, c, target)
			}()
		}
	}()
	return s
}

// pipe copies between c and a new connection to target until either
// side closes.
func pipe(t *testing.T, c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		t.Errorf("dial %s: %v", target, err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// TestRegionLookupRetried: without a region, Open first asks the bucket's
// region; a connection reset then is retried like any request (minio-go
// alone asks once), and the message says how often it was tried only
// when it was retried.
func TestRegionLookupRetried(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	cfg := func(addr, region string, tries int) Config {
		loc, err := ParseLocation("s3:http://" + addr + "/" + bucket + "/repo")
		if err != nil {
			t.Fatal(err)
		}
		c := testConfig(srv, loc)
		c.Region, c.MaxRetries = region, tries
		return c
	}

	for _, region := range []string{"", "us-east-1"} {
		s := startBlinking(t, 0, "")
		_, err := Open(t.Context(), cfg(s.Addr, region, 0))
		if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "tried up to 6 times") {
			t.Fatalf("Open (region %q) against a server that resets every connection: %v, want ErrUnavailable tried 6 times", region, err)
		}
		if n := s.conns.Load(); n != 6 {
			t.Errorf("Open (region %q) against a server that resets every connection: %d connections, want 6", region, n)
		}
	}

	s := startBlinking(t, 0, "")
	_, err := Open(t.Context(), cfg(s.Addr, "", 1))
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "not retried") || strings.Contains(err.Error(), "tried up to") {
		t.Fatalf("Open with one try: %v, want ErrUnavailable saying it was not retried", err)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("Open with one try: %d connections, want 1", n)
	}

	// A blip of two resets at the first request: Open succeeds and the
	// backend works.
	s = startBlinking(t, 2, srv.Addr)
	b, err := Open(t.Context(), cfg(s.Addr, "", 0))
	if err != nil {
		t.Fatalf("Open after two resets: %v", err)
	}
	defer b.Close()
	h := backend.Handle{Type: backend.Snapshot, Name: strings.Repeat("ef", 32)}
	if err := b.Save(t.Context(), h, []byte("after the blip")); err != nil {
		t.Fatal(err)
	}
	loadEqual(t, b, h, []byte("after the blip"))
}

// TestUnknownAccessKey: an access key id the server does not know
// (versitygw: 404 XAdminUserNotFound) is a refusal naming the S3 code and
// the access key id, at Open and Create, with and without a region; not
// a missing bucket or object.
func TestUnknownAccessKey(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	loc, err := ParseLocation(srv.Location(bucket, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, region := range []string{"", "us-east-1"} {
		cfg := testConfig(srv, loc)
		cfg.AccessKeyID, cfg.Region = "NOSUCHKEYID", region
		for op, f := range map[string]func() error{
			"Open":   func() error { _, err := Open(t.Context(), cfg); return err },
			"Create": func() error { _, err := Create(t.Context(), cfg); return err },
		} {
			err := f()
			if !errors.Is(err, ErrRefused) || !errors.Is(err, fs.ErrPermission) || errors.Is(err, backend.ErrNotFound) || errors.Is(err, ErrNoBucket) {
				t.Fatalf("%s (region %q) with an unknown access key id: %v, want ErrRefused", op, region, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "XAdminUserNotFound") || !strings.Contains(msg, "access key id") {
				t.Errorf("%s (region %q) with an unknown access key id: %q, want the S3 code and the access key id named", op, region, msg)
			}
		}
	}
}
