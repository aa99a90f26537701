// Package fsmeta reads the file metadata that the file-copying adapters
// (local, ssh) and the recovery digest share: extended attributes, listed
// and read in one consistent way (sorted by name, a filesystem without
// xattr support giving none), and walks a tree by names relative to its
// root (Walk; WalkSource and ScanSource for a tree about to be copied,
// naming the entry a failure is at). It never follows a symlink.
package fsmeta
