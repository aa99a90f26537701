package repo

import (
	"errors"
	"sync"
	"testing"

	"lifeboat/backend"
	"lifeboat/internal/storetest"
)

// TestInitRaceOneWins: processes initialising one location at once (each
// with its own backend, as on separate hosts): exactly one creates the
// repository, the others fail with ErrRepoExists and leave no key file
// behind; the winner's password opens it.
func TestInitRaceOneWins(t *testing.T) { storetest.Each(t, testInitRaceOneWins) }

func testInitRaceOneWins(t *testing.T, s storetest.Store) {
	const n = 4
	bes := make([]backend.Backend, n)
	bes[0] = s.Create(t)
	for i := 1; i < n; i++ {
		bes[i] = s.Open(t)
	}
	pws := [n][]byte{[]byte("pw-0"), []byte("pw-1"), []byte("pw-2"), []byte("pw-3")}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = Init(t.Context(), bes[i], pws[i], InitOptions{KDF: testKDF()}) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("two inits won: %d and %d", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, ErrRepoExists):
			t.Fatalf("init %d: %v, want ErrRepoExists", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no init won")
	}
	keys := 0
	if err := bes[0].List(t.Context(), backend.Key, func(backend.FileInfo) error { keys++; return nil }); err != nil {
		t.Fatal(err)
	}
	if keys != 1 {
		t.Errorf("%d key files after the race, want the winner's only", keys)
	}
	r, err := Open(t.Context(), bes[0], pws[won], Options{CacheDir: t.TempDir(), NoIndexDB: true})
	if err != nil {
		t.Fatalf("open with the winner's password: %v", err)
	}
	_ = r.Close(t.Context())
}
