// Package clocktest holds the one fake clock of the module's tests, for
// code that takes a clock (Now, After) and cannot run in a
// testing/synctest bubble: tests that also drive child processes, real
// sockets or shared stores, or that give two parts of one test their own
// time. Where the code under test reads the real clock by default and the
// test does none of that, testing/synctest is the simpler choice
// (repotest.Bubble for a test that makes repositories in the bubble).
package clocktest
