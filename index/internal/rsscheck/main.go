// Command rsscheck measures the index DB at scale: build time, lookup
// throughput, file size and peak memory (VmHWM, getrusage maxrss, and the
// peaks of RssAnon and RssFile, sampled every 10 ms).
//
//	go run ./index/internal/rsscheck -n 1000000 -dir /tmp/idx -keep
//	go run ./index/internal/rsscheck -lookup-only -dir /tmp/idx
//	go run ./index/internal/rsscheck -lookup-only -raw-readonly -dir /tmp/idx
//	go run ./index/internal/rsscheck -lookup-only -apply-one -dir /tmp/idx
//
// A build run creates the DB, applies n entries in objects of
// index.MaxObjectEntries entries (packs of 20), closes and reopens it, and
// does the lookups. A -lookup-only run opens an existing DB in a fresh
// process and only does the lookups, which is what a capture sees.
// -raw-readonly opens the file with bbolt read-only instead of index.OpenDB,
// to show what the read-write open costs (it reads the stored free list;
// a file without one has every page walked once to rebuild it), and
// prints how full bbolt's pages are.
// -apply-one adds one object of index.MaxObjectEntries new blobs, as a
// capture does when it saves an index object (it grows the DB).
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/internal/memsample"
	"lifeboat/pack"
)

var repoID = blob.ID{'r', 's', 's'}

const packEntries = 20

// params is saved beside the DB so a -lookup-only run knows the ids.
type params struct {
	N    int    `json:"n"`
	Seed uint64 `json:"seed"`
}

func main() {
	n := flag.Int("n", 1_000_000, "blobs to index")
	dir := flag.String("dir", "", "DB directory (default: a temporary one)")
	keep := flag.Bool("keep", false, "keep the DB directory")
	lookups := flag.Int("lookups", 1_000_000, "random lookups, half hits and half misses")
	seed := flag.Uint64("seed", 1, "seed of the blob ids")
	lookupOnly := flag.Bool("lookup-only", false, "only open the existing DB in -dir and look up")
	raw := flag.Bool("raw-readonly", false, "with -lookup-only: open the file with bbolt read-only, not index.OpenDB")
	applyOne := flag.Bool("apply-one", false, "with -lookup-only: apply one more object of index.MaxObjectEntries new blobs instead of looking up")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		stop, err := memsample.StartCPUProfile(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
	}

	s := memsample.Start(10 * time.Millisecond)
	report("go", runtime.Version())
	if *lookupOnly {
		if *dir == "" {
			log.Fatal("-lookup-only needs -dir")
		}
		b, err := os.ReadFile(filepath.Join(*dir, "rsscheck.json"))
		if err != nil {
			log.Fatal(err)
		}
		var p params
		if err := json.Unmarshal(b, &p); err != nil {
			log.Fatal(err)
		}
		report("n", p.N)
		switch {
		case *applyOne:
			report("mode", "apply-one")
			applyOnePhase(s, *dir, p)
		case *raw:
			report("mode", "lookup-only (bbolt read-only)")
			pageStats(*dir)
			lookupPhase(s, *dir, p, *lookups, true)
		default:
			report("mode", "lookup-only (index.OpenDB)")
			lookupPhase(s, *dir, p, *lookups, false)
		}
		finish(s, *dir)
		return
	}

	if *dir == "" {
		d, err := os.MkdirTemp("", "rsscheck-")
		if err != nil {
			log.Fatal(err)
		}
		*dir = d
	}
	if !*keep {
		defer os.RemoveAll(*dir)
	}
	p := params{N: *n, Seed: *seed}
	report("mode", "build")
	report("n", p.N)
	build(s, *dir, p)
	b, _ := json.Marshal(p)
	if err := os.WriteFile(filepath.Join(*dir, "rsscheck.json"), b, 0o600); err != nil {
		log.Fatal(err)
	}
	lookupPhase(s, *dir, p, *lookups, false)
	finish(s, *dir)
}

// blobID derives blob i's id from the seed (splitmix64).
func blobID(seed uint64, i int) blob.ID {
	var id blob.ID
	x := seed*0x9e3779b97f4a7c15 ^ uint64(i)
	for j := 0; j < blob.IDSize; j += 8 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(id[j:], z^(z>>31))
	}
	return id
}

func blobType(i int) blob.Type {
	if i%8 == 0 {
		return blob.Tree
	}
	return blob.Data
}

// object returns an index object of blobs [first, last) of seed's ids.
func object(seed uint64, first, last int) *index.Object {
	o := &index.Object{Tier: blob.Workspace}
	for i := first; i < last; i += packEntries {
		pk := index.PackInfo{ID: blobID(^seed, i/packEntries)}
		var off uint32
		for j := i; j < min(i+packEntries, last); j++ {
			e := pack.Entry{Type: blobType(j), ID: blobID(seed, j), Offset: off, Length: crypt.Overhead + 1000, PlainLen: 1000}
			pk.Entries = append(pk.Entries, e)
			off += e.Length
		}
		pk.Size = off + 4096
		o.Packs = append(o.Packs, pk)
	}
	return o
}

func build(s *memsample.Sampler, dir string, p params) {
	s.Phase("build")
	start := time.Now()
	d, err := index.OpenDB(dir, repoID)
	if err != nil {
		log.Fatal(err)
	}
	for first := 0; first < p.N; first += index.MaxObjectEntries {
		o := object(p.Seed, first, min(first+index.MaxObjectEntries, p.N))
		if err := d.Apply(blobID(p.Seed+1, first), o); err != nil {
			log.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		log.Fatal(err)
	}
	el := time.Since(start)
	report("build_time", el.Round(time.Millisecond))
	report("build_entries_per_s", int(float64(p.N)/el.Seconds()))
	s.EndPhase()
	report("RssAnon after build", mib(memsample.Status()["RssAnon"]))
	debug.FreeOSMemory() // so the later phases' RssAnon peaks are their own
	report("RssAnon after GC+release", mib(memsample.Status()["RssAnon"]))
}

// applyOnePhase adds one full object of new blobs to an existing DB: what
// recording a large capture's index object costs.
func applyOnePhase(s *memsample.Sampler, dir string, p params) {
	s.Phase("open")
	start := time.Now()
	d, err := index.OpenDB(dir, repoID)
	if err != nil {
		log.Fatal(err)
	}
	report("open_time", time.Since(start).Round(time.Millisecond))
	s.EndPhase()
	debug.FreeOSMemory()
	s.Phase("apply-one")
	seed := p.Seed + uint64(time.Now().UnixNano()) // new blobs on every run
	start = time.Now()
	if err := d.Apply(blobID(seed+1, 0), object(seed, 0, index.MaxObjectEntries)); err != nil {
		log.Fatal(err)
	}
	report("apply_one_time", time.Since(start).Round(time.Millisecond))
	s.EndPhase()
	if err := d.Close(); err != nil {
		log.Fatal(err)
	}
}

// pageStats prints how full bbolt's pages are.
func pageStats(dir string) {
	bdb, err := bolt.Open(filepath.Join(dir, "index.db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer bdb.Close()
	_ = bdb.View(func(tx *bolt.Tx) error {
		st := tx.Bucket([]byte("blobs")).Stats()
		used := st.BranchPageN + st.BranchOverflowN + st.LeafPageN + st.LeafOverflowN
		report("blobs bucket", fmt.Sprintf("%d keys, %d branch + %d leaf pages, leaf fill %.0f%%",
			st.KeyN, st.BranchPageN, st.LeafPageN, 100*float64(st.LeafInuse)/float64(st.LeafAlloc)))
		report("pages", fmt.Sprintf("%d below the high-water mark (%s), %d in the blobs bucket",
			tx.Size()/int64(bdb.Info().PageSize), mib(tx.Size()), used))
		return nil
	})
}

// getter is a lookup of one workspace blob.
type getter func(typ blob.Type, id blob.ID) bool

func lookupPhase(s *memsample.Sampler, dir string, p params, lookups int, raw bool) {
	s.Phase("open")
	start := time.Now()
	get, closeFn := openGetter(dir, raw)
	report("open_time", time.Since(start).Round(time.Millisecond))
	s.EndPhase()

	s.Phase("lookup")
	r := rand.New(rand.NewPCG(p.Seed, 99))
	hits := 0
	start = time.Now()
	for k := range lookups {
		if k%2 == 0 {
			i := r.IntN(p.N)
			if !get(blobType(i), blobID(p.Seed, i)) {
				log.Fatalf("blob %d not found", i)
			}
			hits++
		} else if get(blob.Data, blobID(p.Seed, p.N+r.IntN(1<<40))) {
			log.Fatal("a never-indexed blob was found")
		}
	}
	el := time.Since(start)
	report("lookups", lookups)
	report("lookup_time", el.Round(time.Millisecond))
	report("lookups_per_s", int(float64(lookups)/el.Seconds()))
	s.EndPhase()
	closeFn()
}

func openGetter(dir string, raw bool) (getter, func()) {
	if !raw {
		d, err := index.OpenDB(dir, repoID)
		if err != nil {
			log.Fatal(err)
		}
		if d.Private() {
			log.Fatal("DB is held by another process")
		}
		return func(typ blob.Type, id blob.ID) bool {
				_, ok, err := d.Lookup(blob.Workspace, typ, id)
				if err != nil {
					log.Fatal(err)
				}
				return ok
			}, func() {
				if err := d.Close(); err != nil {
					log.Fatal(err)
				}
			}
	}
	bdb, err := bolt.Open(filepath.Join(dir, "index.db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	key := make([]byte, 2+blob.IDSize)
	return func(typ blob.Type, id blob.ID) bool {
		key[0], key[1] = byte(blob.Workspace), byte(typ)
		copy(key[2:], id[:])
		var ok bool
		_ = bdb.View(func(tx *bolt.Tx) error { ok = tx.Bucket([]byte("blobs")).Get(key) != nil; return nil })
		return ok
	}, func() { _ = bdb.Close() }
}

func finish(s *memsample.Sampler, dir string) {
	if fi, err := os.Stat(filepath.Join(dir, "index.db")); err == nil {
		report("db_file_size", mib(fi.Size()))
	}
	st := memsample.Status()
	report("VmHWM (peak RSS)", mib(st["VmHWM"]))
	report("getrusage maxrss", mib(memsample.SelfMaxRSS()))
	report("RssAnon now", mib(st["RssAnon"]))
	report("RssFile now", mib(st["RssFile"]))
	for _, pk := range s.Stop() {
		report("peak in "+pk.Phase, fmt.Sprintf("RssAnon %s  RssFile %s  VmRSS %s", mib(pk.Anon), mib(pk.File), mib(pk.RSS)))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	report("go HeapSys / TotalAlloc", fmt.Sprintf("%s / %s", mib(int64(ms.HeapSys)), mib(int64(ms.TotalAlloc))))
}

func report(k string, v any) { fmt.Printf("%-26s %v\n", k+":", v) }

func mib(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }
