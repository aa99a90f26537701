package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"lifeboat/blob"
	"lifeboat/repo"
)

// TreeVersion is the tree blob encoding version.
const TreeVersion = 1

// MaxNodesPerBlob caps the entries one tree blob lists; a larger directory
// spreads over several blobs (Node.Subtree), so a directory of a million
// entries never needs one huge blob.
const MaxNodesPerBlob = 8192

// Tree is the decoded content of one tree blob: a run of a directory's
// entries in name order.
type Tree struct {
	Version int    `json:"version"`
	Nodes   []Node `json:"nodes"`
}

// EncodeTree returns the deterministic encoding of nodes, which must be
// sorted by name with no duplicates: the bytes json.Marshal writes for
// Tree{Version: TreeVersion, Nodes: nodes} (see appendTree), so nil nodes
// give "nodes":null and an empty slice "nodes":[]. It sorts each node's
// xattrs by name in place.
func EncodeTree(nodes []Node) ([]byte, error) {
	return appendTreeChecked(make([]byte, 0, treeSizeHint(nodes)), nodes)
}

// appendTreeChecked appends EncodeTree's encoding of nodes to dst.
func appendTreeChecked(dst []byte, nodes []Node) ([]byte, error) {
	for i := range nodes {
		if i > 0 && bytes.Compare(nodes[i-1].Name, nodes[i].Name) >= 0 {
			return nil, fmt.Errorf("tree entries not sorted or duplicated at %q", nodes[i].Name)
		}
		slices.SortFunc(nodes[i].Xattrs, func(a, b Xattr) int { return cmpString(a.Name, b.Name) })
	}
	return appendTree(dst, nodes), nil
}

// DecodeTree parses a tree blob and checks every entry: names valid,
// sorted and unique, node fields consistent. The canonical form appendTree
// writes is parsed by decodeCanonicalTree; anything else goes through
// encoding/json (decodeTreeJSON), so every input decodes, or is refused,
// exactly as encoding/json decodes it.
func DecodeTree(b []byte) (*Tree, error) {
	t, ok := decodeCanonicalTree(b)
	if !ok {
		return decodeTreeJSON(b)
	}
	if err := checkTree(t); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeTreeJSON is DecodeTree with encoding/json alone: the reference the
// canonical parser is tested against, and its fallback.
func decodeTreeJSON(b []byte) (*Tree, error) {
	t, err := unmarshalTreeJSON(b)
	if err != nil {
		return nil, err
	}
	if err := checkTree(t); err != nil {
		return nil, err
	}
	return t, nil
}

// unmarshalTreeJSON decodes the first JSON value of b into a Tree, refusing
// unknown fields, and checks nothing else.
func unmarshalTreeJSON(b []byte) (*Tree, error) {
	var t Tree
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("tree does not decode: %w", err)
	}
	return &t, nil
}

// checkTree applies DecodeTree's checks to a decoded tree: version, entry
// count, names valid, sorted and unique, node fields consistent.
func checkTree(t *Tree) error {
	if t.Version != TreeVersion {
		return fmt.Errorf("tree version %d, this lifeboat reads version %d", t.Version, TreeVersion)
	}
	if len(t.Nodes) > MaxNodesPerBlob {
		return fmt.Errorf("tree lists %d entries, more than %d", len(t.Nodes), MaxNodesPerBlob)
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if err := ValidName(n.Name); err != nil {
			return err
		}
		if i > 0 && bytes.Compare(t.Nodes[i-1].Name, n.Name) >= 0 {
			return fmt.Errorf("tree entries not sorted or duplicated at %q", n.Name)
		}
		if err := n.Valid(); err != nil {
			return err
		}
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BlobSaver stores blobs: repo.Repository satisfies it. SaveBlob must
// keep no reference to data once it returns.
type BlobSaver interface {
	SaveBlob(ctx context.Context, t blob.Tier, typ blob.Type, data []byte) (blob.ID, bool, error)
}

// BlobLoader loads blobs: repo.Repository satisfies it.
type BlobLoader interface {
	LoadBlob(ctx context.Context, t blob.Tier, typ blob.Type, id blob.ID, buf []byte) ([]byte, error)
}

// SaveDir stores a directory's entries (sorted by name, unique) as tree
// blobs of at most MaxNodesPerBlob entries each and returns their ids, the
// directory node's Subtree. An empty directory has one empty tree blob.
func SaveDir(ctx context.Context, s BlobSaver, tier blob.Tier, nodes []Node) ([]blob.ID, error) {
	var ids []blob.ID
	for first := true; first || len(nodes) > 0; first = false {
		part := nodes[:min(len(nodes), MaxNodesPerBlob)]
		nodes = nodes[len(part):]
		// Encoded into a recycled buffer: an unchanged re-capture encodes
		// every directory again to find its id (30 MB of 150 allocated).
		b, err := appendTreeChecked(repo.GetBuffer(treeSizeHint(part)), part)
		if err != nil {
			return nil, err
		}
		id, _, err := s.SaveBlob(ctx, tier, blob.Tree, b)
		repo.PutBuffer(b)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// dirKey is the key of a directory, its tier and tree blob ids, in the
// memos of the directories a walk has done (check, export).
func dirKey(t blob.Tier, subtree []blob.ID) string {
	key := make([]byte, 1, 1+len(subtree)*blob.IDSize)
	key[0] = byte(t)
	for _, id := range subtree {
		key = append(key, id[:]...)
	}
	return string(key)
}

// LoadDir calls fn with every entry of a directory, in name order, loading
// its tree blobs one at a time. Names must keep increasing across blobs.
func LoadDir(ctx context.Context, l BlobLoader, tier blob.Tier, subtree []blob.ID, fn func(*Node) error) error {
	var buf []byte
	return EachNode(subtree, func(id blob.ID) (*Tree, error) {
		b, err := l.LoadBlob(ctx, tier, blob.Tree, id, buf)
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", id.Short(), err)
		}
		t, err := DecodeTree(b)
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", id.Short(), err)
		}
		buf = b[:0]
		return t, nil
	}, fn)
}

// EachNode calls fn for every entry of the directory whose tree blobs are
// subtree, in order, tree giving each blob decoded; names must increase
// across the blobs as within each.
func EachNode(subtree []blob.ID, tree func(blob.ID) (*Tree, error), fn func(*Node) error) error {
	var last []byte
	for _, id := range subtree {
		t, err := tree(id)
		if err != nil {
			return err
		}
		for i := range t.Nodes {
			n := &t.Nodes[i]
			if last != nil && bytes.Compare(last, n.Name) >= 0 {
				return fmt.Errorf("tree %s: entries out of order across blobs at %q", id.Short(), n.Name)
			}
			last = n.Name
			if err := fn(n); err != nil {
				return err
			}
		}
	}
	return nil
}
