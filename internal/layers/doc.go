// Package layers holds the test that keeps Lifeboat's dependencies pointing
// down (ARCHITECTURE.md): cmd/server -> recovery -> checkpoint -> snapshot/profile/prune
// -> repo -> index -> pack -> crypt/chunk/backend -> blob. A package may
// import packages of a lower rank and its own subpackages, nothing else.
package layers
