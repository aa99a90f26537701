// Package repotest makes repositories for tests, in one way for every
// package: a store (a local temp dir unless the test names one), cheap
// argon2id parameters, one password, and a Repository that is closed when
// the test ends. The knobs are the few the tests need: the store, the
// password, the pack sizes and the cache dir.
//
// It is imported by tests only (and by test-support packages); nothing in
// it changes how a repository is written.
package repotest
