package snapshot

import "lifeboat/blob"

// Graft is a tree restored at Path inside the restored snapshot root.
type Graft struct {
	Path string    // slash path from the snapshot root; must not exist in the restored tree
	Root Node      // the directory itself: its metadata, and Subtree listing its entries
	Tier blob.Tier // the tier of Root's trees and chunks
	// Totals are the tree's declared counts: the plan refuses a tree that
	// lists more entries (zero: no limit), as for a snapshot's own tree.
	Totals Totals
}
