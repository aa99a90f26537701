package platformtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Box is one fake sandbox.
type Box struct {
	ID     string
	State  string // the platform's word: "running", "started", "stopped", ...
	Labels map[string]string
	Dir    string // its filesystem root on this host
}

// Sandboxes is the state behind a contract server.
type Sandboxes struct {
	Key string // the credential every request must carry

	root  string
	mu    sync.Mutex
	boxes map[string]*Box
	snaps map[string]string // snapshot or backup id -> a copy of a tree on this host
	next  int
	fault func(w http.ResponseWriter, r *http.Request) bool
	calls map[string]int // "METHOD path-pattern" -> count, for tests
}

// New returns empty sandboxes kept under a test directory.
func New(t testing.TB, key string) *Sandboxes {
	return &Sandboxes{Key: key, root: t.TempDir(), boxes: map[string]*Box{}, snaps: map[string]string{}, calls: map[string]int{}}
}

// Serve starts h on a local port until the test ends.
func Serve(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// Start serves the handler platform makes over new sandboxes that take
// the credential key, until the test ends; it returns the sandboxes, the
// server's URL and a directory for the adapter's cache.
func Start(t testing.TB, key string, platform func(*Sandboxes) http.Handler) (s *Sandboxes, base, cache string) {
	s = New(t, key)
	return s, Serve(t, platform(s)).URL, t.TempDir()
}

// Down returns the URL of a server that is no longer there.
func Down() string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// SetFault makes fn answer requests instead of the platform while it
// returns true; nil removes it.
func (s *Sandboxes) SetFault(fn func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	s.fault = fn
	s.mu.Unlock()
}

// Status is a fault answering every request with code, body and, when
// not empty, Retry-After.
func Status(code int, body, retryAfter string) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
		return true
	}
}

// Hang is a fault that answers nothing until the request is cancelled or
// release is closed.
func Hang(release <-chan struct{}) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	}
}

// gate checks the credential and runs the fault; false means answered.
func (s *Sandboxes) gate(w http.ResponseWriter, r *http.Request, authorized func(*http.Request) bool, deny func(http.ResponseWriter)) bool {
	if !authorized(r) {
		deny(w)
		return false
	}
	s.mu.Lock()
	fault := s.fault
	s.mu.Unlock()
	return fault == nil || !fault(w, r)
}

// Add makes a sandbox in state, with labels, and returns a copy of it.
func (s *Sandboxes) Add(id, state string, labels map[string]string) (Box, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		s.next++
		id = fmt.Sprintf("sbx-%04d", s.next)
	}
	if _, ok := s.boxes[id]; ok {
		return Box{}, fmt.Errorf("sandbox %s exists", id)
	}
	b := &Box{ID: id, State: state, Labels: map[string]string{}, Dir: filepath.Join(s.root, "boxes", id)}
	for k, v := range labels {
		b.Labels[k] = v
	}
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return Box{}, err
	}
	s.boxes[id] = b
	return *b, nil
}

// Get returns a copy of sandbox id.
func (s *Sandboxes) Get(id string) (Box, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[id]
	if !ok {
		return Box{}, false
	}
	c := *b
	c.Labels = map[string]string{}
	for k, v := range b.Labels {
		c.Labels[k] = v
	}
	return c, true
}

// List returns copies of the sandboxes whose labels include want.
func (s *Sandboxes) List(want map[string]string) []Box {
	s.mu.Lock()
	var ids []string
	for id, b := range s.boxes {
		ok := true
		for k, v := range want {
			ok = ok && b.Labels[k] == v
		}
		if ok {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	var out []Box
	for _, id := range ids {
		if b, ok := s.Get(id); ok {
			out = append(out, b)
		}
	}
	return out
}

// Update changes sandbox id under the lock.
func (s *Sandboxes) Update(id string, fn func(b *Box)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[id]
	if ok {
		fn(b)
	}
	return ok
}

// Remove deletes sandbox id and its files (the platform losing it, or a
// delete).
func (s *Sandboxes) Remove(id string) {
	s.mu.Lock()
	b, ok := s.boxes[id]
	delete(s.boxes, id)
	s.mu.Unlock()
	if ok {
		_ = os.RemoveAll(b.Dir)
	}
}

// Wipe deletes sandbox id's files but keeps its record (a container that
// restarted without its disk).
func (s *Sandboxes) Wipe(id string) error {
	b, ok := s.Get(id)
	if !ok {
		return fmt.Errorf("no sandbox %s", id)
	}
	if err := os.RemoveAll(b.Dir); err != nil {
		return err
	}
	return os.MkdirAll(b.Dir, 0o755)
}

// HostPath maps the absolute path p in sandbox id to this host.
func (s *Sandboxes) HostPath(id, p string) (string, error) {
	b, ok := s.Get(id)
	if !ok {
		return "", errNoBox
	}
	if !path.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	return filepath.Join(b.Dir, filepath.FromSlash(path.Clean(p))), nil
}

var errNoBox = errors.New("no such sandbox")

// Run runs argv on this host in the mapped directory dir of sandbox id.
func (s *Sandboxes) Run(ctx context.Context, id, dir string, argv []string) (code int, stdout, stderr []byte, err error) {
	if len(argv) == 0 {
		return 0, nil, nil, errors.New("empty command")
	}
	hd, err := s.HostPath(id, dir)
	if err != nil {
		return 0, nil, nil, err
	}
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = hd, &o, &e
	err = cmd.Run()
	var xe *exec.ExitError
	switch {
	case errors.As(err, &xe):
		return xe.ExitCode(), o.Bytes(), e.Bytes(), nil
	case err != nil:
		return 127, nil, []byte(err.Error()), nil
	}
	return 0, o.Bytes(), e.Bytes(), nil
}

// Copy copies the tree at dir in sandbox id to a new snapshot and returns
// its id.
func (s *Sandboxes) Copy(ctx context.Context, id, dir, snapID string) error {
	src, err := s.HostPath(id, dir)
	if err != nil {
		return err
	}
	dst := filepath.Join(s.root, "snapshots", snapID)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v: %s", err, strings.TrimSpace(string(out)))
	}
	s.mu.Lock()
	s.snaps[snapID] = dst
	s.mu.Unlock()
	return nil
}

// Restore replaces the tree at dir in sandbox id with snapshot snapID.
func (s *Sandboxes) Restore(ctx context.Context, id, dir, snapID string) error {
	s.mu.Lock()
	src, ok := s.snaps[snapID]
	s.mu.Unlock()
	if !ok {
		return errNoSnapshot
	}
	dst, err := s.HostPath(id, dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

var errNoSnapshot = errors.New("no such snapshot")

// DropSnapshot deletes snapshot snapID; false when there was none.
func (s *Sandboxes) DropSnapshot(snapID string) bool {
	s.mu.Lock()
	dir, ok := s.snaps[snapID]
	delete(s.snaps, snapID)
	s.mu.Unlock()
	if ok {
		_ = os.RemoveAll(dir)
		_ = os.Remove(dir + ".dir")
	}
	return ok
}

// Count records one call of route, for tests that check what was called.
func (s *Sandboxes) count(route string) {
	s.mu.Lock()
	s.calls[route]++
	s.mu.Unlock()
}

// Calls returns how often route ("POST /v1/sandboxes") was called.
func (s *Sandboxes) Calls(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[route]
}

func bearer(key string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+key }
}

// writeFileAt writes body to the host path of p in sandbox id.
func (s *Sandboxes) writeFileAt(id, p string, body []byte, mode os.FileMode) error {
	hp, err := s.HostPath(id, p)
	if err != nil {
		return err
	}
	return os.WriteFile(hp, body, mode)
}
