// Package chromiumtest drives a headless Chromium over the DevTools
// protocol for tests of the status page: start it on a pipe, evaluate
// JavaScript in the page, wait for a DOM condition (a MutationObserver, no
// polling and no sleeps), follow protocol events (request interception),
// record content-security-policy violations, and take screenshots
// compared with golden PNGs within a tolerance.
//
// Invariants: every browser a test starts is killed in its cleanup; every
// wait has a deadline and fails the test with the page's DOM when it
// passes. Only tests import this package.
package chromiumtest
