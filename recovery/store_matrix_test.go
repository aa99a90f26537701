package recovery

import (
	"context"
	"strings"
	"sync"
	"testing"

	"lifeboat/recovery/statedb/pgtest"
)

// storeKinds are the state store implementations the store, lifecycle
// and recovery tests run against.
var storeKinds = []string{"bolt", "postgres"}

// eachStore runs fn once per state store implementation, as subtests
// named after it; the envs (newEnv, newREnv) open the subtest's kind.
func eachStore(t *testing.T, fn func(t *testing.T)) {
	for _, kind := range storeKinds {
		t.Run(kind, fn)
	}
}

// storeURLs keeps one database per test, so a reopened env finds its state.
var storeURLs sync.Map // test name -> URL

// testStoreURL is the database of test t when it runs on PostgreSQL
// (inside eachStore's "postgres" subtest), else "".
func testStoreURL(t testing.TB) string {
	if !strings.Contains(t.Name()+"/", "/postgres/") {
		return ""
	}
	if u, ok := storeURLs.Load(t.Name()); ok {
		return u.(string)
	}
	u := pgtest.URL(t)
	storeURLs.Store(t.Name(), u)
	t.Cleanup(func() { storeURLs.Delete(t.Name()) })
	return u
}

// openTestStore opens test t's state store: the embedded one in dir, or
// its PostgreSQL database.
func openTestStore(t testing.TB, dir string) (*Store, error) {
	return OpenStoreAt(context.Background(), StoreOptions{Dir: dir, URL: testStoreURL(t)})
}
