// Package layers holds the test that keeps Lifeboat's imports to the edges
// docs/architecture.md draws. allowed (layers_test.go) lists, for every
// package of the module, the module packages it may import; the test fails
// on an import the table does not list, on a package the table does not
// name, and on a table entry for a package that no longer exists. Test
// files are not checked: only what the binaries are built from.
package layers
