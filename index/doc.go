// Package index maps blob ids to their place in packs. It has two parts:
//
//   - Index objects (Object, Seal, Open): the authoritative, encrypted
//     record in the repository, one tier per object, written only after
//     every pack it names is durable. They can always be rebuilt from pack
//     headers alone.
//   - DB: a local bbolt cache of all index objects a key can open, so a
//     lookup costs one B+tree search and memory does not grow with the
//     number of blobs. It records which index objects it has applied and
//     the packs each lists; it catches up on new ones and drops the gone
//     ones (a prune superseded them) with the places in packs no present
//     object lists, and is rebuilt from scratch only when the file is
//     missing, corrupt or from another repository or format.
//
// A blob with several places keeps them all: one answers lookups (never
// one in a pack that is not stored while another is, so a stale index
// object put back cannot hide a stored copy), the others are copies that
// readers fall back to (copies.go). Verify loads every index object from
// the repository, applied or not, for check, and rebuilds the DB when it
// does not hold what they say.
//
// Invariants: the DB never holds an entry that no index object in the
// repository supports, except between a prune and the next Sync; decoders
// check every count and length against the bytes they have before
// allocating.
package index
