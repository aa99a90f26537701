package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
)

// Finding a workspace's snapshots needs three things of each manifest:
// its workspace, its time and whether it is complete. A repository with a
// local index remembers them per snapshot id in its snapshot catalog
// (repo.SnapshotCatalog): a listing then loads only the manifests of the
// workspace asked for and those the catalog does not know yet (and
// `latest` only the newest of them), not one per snapshot in the
// repository, which from object storage is a request each. A manifest
// never changes, so neither does what the catalog says of it; a record is
// sealed and bound to its snapshot's id, so it says only what that
// snapshot's authenticated manifest said.

// catalogRecordVersion is the encoding version of a catalog record.
const catalogRecordVersion = 1

// catalogRecord is what the catalog keeps of one manifest.
type catalogRecord struct {
	workspace string
	time      time.Time
	complete  bool
}

// encodeCatalogRecord encodes what the catalog keeps of m: version,
// complete, seconds and nanoseconds of its time, workspace.
func encodeCatalogRecord(m *Manifest) []byte {
	b := []byte{catalogRecordVersion, 0}
	if m.Complete {
		b[1] = 1
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Time.Unix()))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.Time.Nanosecond()))
	return append(b, m.Workspace...)
}

func decodeCatalogRecord(b []byte) (*catalogRecord, bool) {
	if len(b) < 14 || b[0] != catalogRecordVersion || b[1] > 1 {
		return nil, false
	}
	sec, nsec := int64(binary.LittleEndian.Uint64(b[2:])), binary.LittleEndian.Uint32(b[10:])
	if nsec >= 1e9 {
		return nil, false
	}
	return &catalogRecord{workspace: string(b[14:]), time: time.Unix(sec, int64(nsec)).UTC(), complete: b[1] == 1}, true
}

// listedSnapshot is one snapshot of a listing: what the catalog says of
// it, and its manifest or the error loading it gave, once loaded.
type listedSnapshot struct {
	id  blob.ID
	rec *catalogRecord // nil: the catalog does not know it
	m   *Manifest
	err error
}

// workspace, at and complete are what is known of the snapshot, loaded or
// from the catalog; "" and false when neither.
func (l *listedSnapshot) workspace() string {
	if l.m != nil {
		return l.m.Workspace
	}
	if l.rec != nil {
		return l.rec.workspace
	}
	return ""
}

func (l *listedSnapshot) at() time.Time {
	if l.m != nil {
		return l.m.Time
	}
	if l.rec != nil {
		return l.rec.time
	}
	return time.Time{}
}

func (l *listedSnapshot) complete() bool {
	if l.m != nil {
		return l.m.Complete
	}
	return l.rec != nil && l.rec.complete
}

// snapshotListing is the stored snapshots whose ids start with a prefix,
// and the repository's catalog (nil when it has none).
type snapshotListing struct {
	all     []listedSnapshot
	cat     *repo.SnapshotCatalog
	records int  // the catalog's records in all
	whole   bool // every stored snapshot is listed (no prefix)
}

// listSnapshots lists the stored snapshots whose ids start with prefix,
// with what the catalog says of each. A catalog that fails is not used.
func listSnapshots(ctx context.Context, s ObjectStore, prefix string) (*snapshotListing, error) {
	l := &snapshotListing{whole: prefix == ""}
	err := s.ListObjects(ctx, crypt.KindSnapshot, func(id blob.ID) error {
		if strings.HasPrefix(id.String(), prefix) {
			l.all = append(l.all, listedSnapshot{id: id})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if o, ok := s.(interface{ SnapshotCatalog() *repo.SnapshotCatalog }); ok {
		l.cat = o.SnapshotCatalog()
	}
	if l.cat == nil {
		return l, nil
	}
	// Counted only for a listing of all, the one that drops records of
	// snapshots gone (remember), also when none is left.
	recs, total, err := l.cat.Get(l.ids(), l.whole)
	if err != nil {
		l.cat = nil
		return l, nil
	}
	l.records = total
	for i, b := range recs {
		if b != nil {
			l.all[i].rec, _ = decodeCatalogRecord(b)
		}
	}
	return l, nil
}

// ids returns the listed snapshots' ids, in listing order.
func (l *snapshotListing) ids() []blob.ID {
	ids := make([]blob.ID, len(l.all))
	for i, e := range l.all {
		ids[i] = e.id
	}
	return ids
}

// load loads, manifestLoaders at a time, the manifests of the listed
// snapshots that want picks and that are not loaded yet.
func (l *snapshotListing) load(ctx context.Context, s ObjectStore, want func(*listedSnapshot) bool) error {
	var todo []*listedSnapshot
	for i := range l.all {
		if e := &l.all[i]; e.m == nil && e.err == nil && want(e) {
			todo = append(todo, e)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(todo), manifestLoaders) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(todo) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				todo[i].m, todo[i].err = LoadManifest(ctx, s, todo[i].id)
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// remember adds the snapshots loaded that the catalog did not know to
// it, and, after a listing of every snapshot, drops its records of those
// no longer stored. The catalog only saves loads: its failures are not
// errors.
func (l *snapshotListing) remember() {
	if l.cat == nil {
		return
	}
	var ids []blob.ID
	var recs [][]byte
	known := 0
	for _, e := range l.all {
		switch {
		case e.rec != nil:
			known++
		case e.m != nil:
			ids = append(ids, e.id)
			recs = append(recs, encodeCatalogRecord(e.m))
		}
	}
	_ = l.cat.Put(ids, recs)
	if l.whole && l.records > known {
		listed := l.ids()
		slices.SortFunc(listed, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
		_, _ = l.cat.Retain(listed)
	}
}
