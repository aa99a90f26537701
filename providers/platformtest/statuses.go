package platformtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

// StatusCase is one answer a platform gives and the kind an adapter must
// make of it.
type StatusCase struct {
	Status     int
	Body       string
	RetryAfter string // the Retry-After header sent, when not empty
	Want       providers.Kind
	WantWait   time.Duration // RetryAfter(err) expected
}

// CommonStatuses are the answers every platform can give: 401 and 403
// (unauthorized), 429 with Retry-After (rate_limited, the wait honoured),
// 500, 502 with a proxy's HTML and 503 (unavailable).
func CommonStatuses(unauthorized, rateLimited string) []StatusCase {
	return []StatusCase{
		{Status: 401, Body: unauthorized, Want: providers.KindUnauthorized},
		{Status: 403, Body: unauthorized, Want: providers.KindUnauthorized},
		{Status: 429, Body: rateLimited, RetryAfter: "12", Want: providers.KindRateLimited, WantWait: 12 * time.Second},
		{Status: 500, Body: `{}`, Want: providers.KindUnavailable},
		{Status: 502, Body: `<html>502 Bad Gateway</html>`, Want: providers.KindUnavailable},
		{Status: 503, Body: `{}`, Want: providers.KindUnavailable},
	}
}

// CheckStatuses answers every request with each case in turn and checks
// that Inspect of the running instance id never says Missing and fails
// with the case's kind and wait, and that ReadFiles of id, Create (key
// "other") and each of more (the platform's other calls, by name) fail
// with that kind too. Then, with the faults gone, id is
// running again; a provider built with a wrong credential (wrong, its
// credential "wrong-secret") is unauthorized without echoing it; and a
// platform that does not answer before the deadline is unavailable.
func CheckStatuses(t *testing.T, s *Sandboxes, p providers.Provider, id providers.InstanceID, cases []StatusCase,
	more map[string]func() error, wrong providers.Provider) {
	t.Helper()
	ctx := context.Background()
	for _, c := range cases {
		s.SetFault(Status(c.Status, c.Body, c.RetryAfter))
		st, err := p.Inspect(ctx, id)
		if st.State == providers.Missing {
			t.Fatalf("%d answered as Missing", c.Status)
		}
		providertest.WantKind(t, fmt.Sprintf("Inspect answered %d", c.Status), err, c.Want)
		if d, _ := providers.RetryAfter(err); d != c.WantWait {
			t.Fatalf("%d: RetryAfter %v, want %v", c.Status, d, c.WantWait)
		}
		_, err = p.ReadFiles(ctx, id)
		providertest.WantKind(t, fmt.Sprintf("ReadFiles answered %d", c.Status), err, c.Want)
		_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "other"})
		providertest.WantKind(t, fmt.Sprintf("Create answered %d", c.Status), err, c.Want)
		for name, call := range more {
			providertest.WantKind(t, fmt.Sprintf("%s answered %d", name, c.Status), call(), c.Want)
		}
	}
	s.SetFault(nil)
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("after the faults: %+v, %v", st, err)
	}
	_, err := wrong.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect with a wrong credential", err, providers.KindUnauthorized)
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("error carries the credential: %v", err)
	}
	release := make(chan struct{})
	defer close(release)
	s.SetFault(Hang(release))
	defer s.SetFault(nil)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = p.Inspect(tctx, id)
	providertest.WantKind(t, "Inspect timing out", err, providers.KindUnavailable)
}

// Harness is the conformance harness for an adapter built by newAt against
// the contract server at base: the platform removes a sandbox behind the
// adapter's back; the same adapter aimed at a server that is gone is
// unreachable; Peek lists every sandbox's files; DenyWrites makes the
// staging directory (staging, absolute in the sandbox) of every sandbox
// refuse new entries and returns the name an error must carry (its last
// two components, as the adapter's commands name it).
func (s *Sandboxes) Harness(base string, absent providers.InstanceID, staging string, newAt func(t *testing.T, base string) providers.Provider) providertest.Harness {
	return providertest.Harness{
		New:              func(t *testing.T) providers.Provider { return newAt(t, base) },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) { s.Remove(string(id)) },
		Unreachable:      func(t *testing.T) providers.Provider { return newAt(t, Down()) },
		Absent:           absent,
		Peek:             func(t *testing.T) string { return s.peek(t) },
		DenyWrites: func(t *testing.T) string {
			for _, b := range s.List(nil) {
				hp, err := s.HostPath(b.ID, staging)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(hp, 0o755); err != nil {
					t.Fatal(err)
				}
				if !providertest.DenyWrites(t, hp) {
					return ""
				}
			}
			return path.Join(path.Base(path.Dir(staging)), path.Base(staging))
		},
	}
}

// peek lists every file of every sandbox with its type and size.
func (s *Sandboxes) peek(t *testing.T) string {
	var lines []string
	root := filepath.Join(s.root, "boxes")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, fmt.Sprintf("%s %v %d", rel, info.Mode().Type(), info.Size()))
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("peeking at the sandboxes: %v", err)
	}
	return strings.Join(lines, "\n")
}

// NewWithTree creates an instance of p (key k) and puts providertest.Tree
// (tag) into it through WriteFiles and Switch; it returns the instance and
// the source tree.
func NewWithTree(t *testing.T, p providers.Provider, key, tag string) (providers.InstanceID, string) {
	t.Helper()
	id := providertest.MustCreate(t, p, key)
	src := t.TempDir()
	providertest.Tree(t, src, tag)
	providertest.PutTree(t, p, id, src)
	return id, src
}

// WantTree fails t unless ReadFiles of id shows the tree src.
func WantTree(t *testing.T, p providers.Provider, id providers.InstanceID, src, when string) {
	t.Helper()
	f, err := p.ReadFiles(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := providertest.Listing(t, f.Dir()), providertest.Listing(t, src); got != want {
		t.Fatalf("%s:\n%s\nwant:\n%s", when, got, want)
	}
}
