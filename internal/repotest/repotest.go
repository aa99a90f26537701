package repotest

import (
	"context"
	"testing"

	"lifeboat/backend"
	"lifeboat/crypt"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
)

// Password is the password of a repository made with no Options.Password.
var Password = []byte("lifeboat test password")

// KDF is argon2id with the cheapest parameters: tests do not pay for a
// real password hash.
func KDF() crypt.KDFParams { return crypt.NewKDFParams(1, 64, 1) }

// InitPackSize is the target pack size a repository is made with when
// Options.Init.PackSize is zero.
const InitPackSize = 4 << 20

// Options are the knobs of a test repository; the zero value is a local
// repository in a temp dir with 4 MiB packs and Password.
type Options struct {
	Store    storetest.Store  // where the repository lives; zero: storetest.Local
	Password []byte           // nil: Password
	Init     repo.InitOptions // zero PackSize: InitPackSize; zero KDF: KDF()
	Open     repo.Options     // empty CacheDir: a temp dir for this call
}

func (o Options) password() []byte {
	if o.Password == nil {
		return Password
	}
	return o.Password
}

// Init makes an empty repository in o.Store (a new local temp dir when it
// is zero) and returns its backend, closed when the test ends, and the
// store.
func Init(t testing.TB, o Options) (backend.Backend, storetest.Store) {
	t.Helper()
	s := o.Store
	if s.Location == "" {
		s = storetest.Local(t)
	}
	in := o.Init
	if in.PackSize == 0 {
		in.PackSize = InitPackSize
	}
	if in.KDF.Algorithm == "" {
		in.KDF = KDF()
	}
	be := s.Create(t)
	if _, err := repo.Init(context.Background(), be, o.password(), in); err != nil {
		t.Fatalf("init repository in %s: %v", s.Location, err)
	}
	return be, s
}

// Open opens the repository in be with o.Password and o.Open (a temp
// cache dir when o.Open.CacheDir is empty); it is closed when the test
// ends.
func Open(t testing.TB, be backend.Backend, o Options) *repo.Repository {
	t.Helper()
	ro := o.Open
	if ro.CacheDir == "" {
		ro.CacheDir = t.TempDir()
	}
	r, err := repo.Open(context.Background(), be, o.password(), ro)
	if err != nil {
		t.Fatalf("open repository: %v", err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// New is Init then Open: a fresh repository, open.
func New(t testing.TB, o Options) *repo.Repository {
	t.Helper()
	be, _ := Init(t, o)
	return Open(t, be, o)
}
