package s3

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/internal/s3test"
)

// faultBackend opens a fresh bucket on srv through a fault proxy, with at
// most tries tries per request.
func faultBackend(t *testing.T, srv *s3test.Server, tries int) (*Backend, *s3test.Proxy) {
	t.Helper()
	p := srv.Proxy(t)
	loc, err := ParseLocation(p.Location(srv.NewBucket(t), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(srv, loc)
	cfg.MaxRetries = tries
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, p
}

func statuses(p *s3test.Proxy, method, path string) []int {
	var out []int
	for _, x := range p.Log() {
		if x.Method == method && strings.Contains(x.Path, path) {
			out = append(out, x.Status)
		}
	}
	return out
}

// TestFaults: each fault between the client and a real S3 server ends in
// success or a clear error, and a Save that fails leaves nothing.
func TestFaults(t *testing.T) {
	srv := s3test.Start(t)
	data := bytes.Repeat([]byte("lifeboat fault proxy "), 50_000) // ~1 MiB
	pack := backend.Handle{Type: backend.Pack, Name: strings.Repeat("ab", 32)}

	t.Run("SlowDown then success", func(t *testing.T) {
		b, p := faultBackend(t, srv, 0)
		f := p.Add(s3test.Fault{Method: http.MethodPut, Path: "/data/", Times: 2, Action: s3test.SlowDown})
		if err := b.Save(t.Context(), pack, data); err != nil {
			t.Fatalf("Save after two 503 SlowDown: %v", err)
		}
		if p.Hits(f) != 2 {
			t.Errorf("SlowDown hit %d requests, want 2", p.Hits(f))
		}
		loadEqual(t, b, pack, data)
	})

	t.Run("SlowDown for good", func(t *testing.T) {
		b, p := faultBackend(t, srv, 2)
		p.Add(s3test.Fault{Method: http.MethodPut, Action: s3test.SlowDown})
		err := b.Save(t.Context(), pack, data)
		if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "SlowDown") {
			t.Fatalf("Save against a server that always answers SlowDown: %v, want ErrUnavailable naming SlowDown", err)
		}
		p.Clear()
		if _, err := b.Stat(t.Context(), pack); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("after the failed Save: Stat %v, want not found", err)
		}
	})

	t.Run("lost answer to a PUT that landed", func(t *testing.T) {
		b, p := faultBackend(t, srv, 0)
		cfg := backend.Handle{Type: backend.Config}
		for _, h := range []backend.Handle{pack, cfg} {
			f := p.Add(s3test.Fault{Method: http.MethodPut, Path: b.key(h), Times: 1, Action: s3test.LoseResponse})
			if err := b.Save(t.Context(), h, data); err != nil {
				t.Fatalf("Save %s whose first answer was lost: %v", h, err)
			}
			// 200 (lost), then 412 for the retry. Between them the proxy
			// may answer 502 when versitygw refuses the retry (412) and
			// closes before the proxy has sent it the whole body; the
			// client retries that too.
			got := statuses(p, http.MethodPut, b.key(h))
			ok := p.Hits(f) == 1 && len(got) >= 2 && got[0] == http.StatusOK && got[len(got)-1] == http.StatusPreconditionFailed
			for _, st := range got[1 : len(got)-1] {
				ok = ok && st == http.StatusBadGateway
			}
			if !ok {
				t.Fatalf("Save %s: PUT answers %v (fault hit %d), want 200 (lost) then 412 for the retry", h, got, p.Hits(f))
			}
			loadEqual(t, b, h, data)
		}
		// A different config is still refused after all that.
		if err := b.Save(t.Context(), cfg, data[:100]); !errors.Is(err, backend.ErrExists) {
			t.Fatalf("Save of another config: %v, want ErrExists", err)
		}
	})

	t.Run("lost answer, then every retry failing", func(t *testing.T) {
		// What a server that refuses a retry (412) before reading its
		// body does through a proxy: the retry's connection breaks and
		// the client never hears the 412.
		b, p := faultBackend(t, srv, 3)
		cfg := backend.Handle{Type: backend.Config}
		for _, h := range []backend.Handle{pack, cfg} {
			lost := p.Add(s3test.Fault{Method: http.MethodPut, Path: b.key(h), Times: 1, Action: s3test.LoseResponse})
			refused := p.Add(s3test.Fault{Method: http.MethodPut, Path: b.key(h), Action: s3test.SlowDown}) // the tries after the first
			if err := b.Save(t.Context(), h, data); err != nil {
				t.Fatalf("Save %s whose first try landed and whose retries all failed: %v", h, err)
			}
			if p.Hits(lost) != 1 || p.Hits(refused) != 2 {
				t.Fatalf("Save %s: faults hit %d and %d times, want 1 and 2 (%v)", h, p.Hits(lost), p.Hits(refused), p.Log())
			}
			p.Clear()
			loadEqual(t, b, h, data)
		}
		// Nothing landed: the error stays.
		other := backend.Handle{Type: backend.Pack, Name: strings.Repeat("cd", 32)}
		p.Add(s3test.Fault{Method: http.MethodPut, Action: s3test.SlowDown})
		if err := b.Save(t.Context(), other, data); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Save while every PUT fails: %v, want ErrUnavailable", err)
		}
		// A different config than the stored one is not taken for it.
		if err := b.Save(t.Context(), cfg, data[:100]); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Save of another config while every PUT fails: %v, want ErrUnavailable", err)
		}
	})

	t.Run("reset mid-download", func(t *testing.T) {
		b, p := faultBackend(t, srv, 3)
		if err := b.Save(t.Context(), pack, data); err != nil {
			t.Fatal(err)
		}
		f := p.Add(s3test.Fault{Method: http.MethodGet, Path: "/data/", Times: 2, Action: s3test.ResetBody})
		loadEqual(t, b, pack, data)
		buf := make([]byte, 300_000)
		if err := b.LoadInto(t.Context(), pack, 1000, buf); err != nil || !bytes.Equal(buf, data[1000:301_000]) {
			t.Fatalf("LoadInto after resets: %v", err)
		}
		if p.Hits(f) != 2 {
			t.Errorf("reset hit %d downloads, want 2", p.Hits(f))
		}
		p.Add(s3test.Fault{Method: http.MethodGet, Path: "/data/", Action: s3test.ResetBody})
		_, err := b.Load(t.Context(), pack, 0, 0)
		if !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrShortRead) {
			t.Fatalf("Load when every download breaks off: %v, want ErrUnavailable", err)
		}
	})

	t.Run("slow body", func(t *testing.T) {
		b, p := faultBackend(t, srv, 0)
		if err := b.Save(t.Context(), pack, data); err != nil {
			t.Fatal(err)
		}
		f := p.Add(s3test.Fault{Method: http.MethodGet, Path: "/data/", Times: 1, Action: s3test.SlowBody, Delay: time.Millisecond})
		loadEqual(t, b, pack, data)
		if p.Hits(f) != 1 {
			t.Fatalf("slow body hit %d downloads, want 1", p.Hits(f))
		}
		// Cancelled while the body trickles in: the Load returns the
		// cancellation, not a short read and not after the whole body.
		fired := make(chan struct{}, 1)
		p.Add(s3test.Fault{Method: http.MethodGet, Path: "/data/", Times: 1, Action: s3test.SlowBody, Delay: time.Hour, Fired: fired})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { _, err := b.Load(ctx, pack, 0, 0); done <- err }()
		select {
		case <-fired:
		case err := <-done:
			t.Fatalf("Load returned (%v) before the slow-body fault fired", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Load cancelled during a slow body: %v, want context.Canceled", err)
		}
	})
}

func loadEqual(t *testing.T, b *Backend, h backend.Handle, want []byte) {
	t.Helper()
	got, err := b.Load(t.Context(), h, 0, 0)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Load %s: %d bytes, %v; want %d bytes", h, len(got), err, len(want))
	}
}
