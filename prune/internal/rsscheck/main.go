// Command rsscheck measures prune's peak memory at scale on a synthetic
// repository: n data blobs of 64 random bytes in real packs and index
// objects, and a synthetic Source whose one snapshot reaches every blob i
// with i%3 != 0 (so a third of every pack is dead and prune repacks).
//
//	go run ./prune/internal/rsscheck -build -n 1000000 -dir /tmp/p1m
//	go run ./prune/internal/rsscheck -prune -n 1000000 -dir /tmp/p1m
//
// -build makes the repository (its memory is not what we measure); -prune,
// in a fresh process, plans and executes a prune and prints the plan, the
// time and the peak RSS (getrusage maxrss).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"time"

	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/memsample"
	"lifeboat/prune"
	"lifeboat/repo"
)

var pw = []byte("rsscheck")

func content(i int) []byte {
	b := make([]byte, 64)
	rng := rand.New(rand.NewPCG(uint64(i), 99))
	for j := 0; j < 64; j += 8 {
		binary.LittleEndian.PutUint64(b[j:], rng.Uint64())
	}
	return b
}

type source struct {
	r *repo.Repository
	n int
}

func (s source) Snapshots(context.Context) ([]blob.ID, error) { return []blob.ID{{1}}, nil }

func (s source) Reach(_ context.Context, _ blob.ID, m repo.Marker) error {
	k, err := s.r.TierKeys(blob.Workspace)
	if err != nil {
		return err
	}
	for i := range s.n {
		if i%3 != 0 {
			if err := m.Add(blob.Workspace, blob.Data, k.BlobID(content(i))); err != nil {
				return err
			}
		}
	}
	return nil
}

func main() {
	sampler := memsample.Start(10 * time.Millisecond)
	sampler.Phase("run")
	build := flag.Bool("build", false, "build the repository")
	doPrune := flag.Bool("prune", false, "prune it")
	n := flag.Int("n", 1_000_000, "blobs")
	dir := flag.String("dir", "/tmp/prune-rss", "work directory")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile of the prune here")
	flag.Parse()
	ctx := context.Background()
	repoDir, cache := filepath.Join(*dir, "repo"), filepath.Join(*dir, "cache")
	start := time.Now()
	if *build {
		be, err := local.Create(repoDir)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := repo.Init(ctx, be, pw, repo.InitOptions{PackSize: 4 << 20, KDF: crypt.NewKDFParams(1, 64, 1)}); err != nil {
			log.Fatal(err)
		}
		r, err := repo.Open(ctx, be, pw, repo.Options{CacheDir: cache})
		if err != nil {
			log.Fatal(err)
		}
		for i := range *n {
			if _, _, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, content(i)); err != nil {
				log.Fatal(err)
			}
		}
		if err := r.Close(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("built %d blobs in %.1fs\n", *n, time.Since(start).Seconds())
	}
	if *doPrune {
		be, err := local.Open(repoDir)
		if err != nil {
			log.Fatal(err)
		}
		r, err := repo.Open(ctx, be, pw, repo.Options{CacheDir: cache})
		if err != nil {
			log.Fatal(err)
		}
		if *cpuprof != "" {
			stop, err := memsample.StartCPUProfile(*cpuprof)
			if err != nil {
				log.Fatal(err)
			}
			defer stop()
		}
		opened := time.Now()
		p, err := prune.PlanPrune(ctx, r, source{r, *n}, prune.Options{TempDir: *dir})
		if err != nil {
			log.Fatal(err)
		}
		planned := time.Now()
		fmt.Printf("plan: %d packs, %d blobs, %d live; delete %d, repack %d packs (%d MiB rewritten)\n",
			p.Packs, p.Blobs, p.LiveBlobs, len(p.Delete), len(p.Repack), p.BytesRewritten>>20)
		st, err := p.Execute(ctx, r, source{r, *n}, prune.ExecOptions{Lock: func(ctx context.Context) (*repo.Lock, error) {
			return r.Lock(ctx, repo.LockExclusive, repo.LockOptions{Wait: -1})
		}})
		if err != nil {
			log.Fatal(err)
		}
		p.Close()
		if err := r.Close(ctx); err != nil {
			log.Fatal(err)
		}
		sampler.EndPhase()
		pk := sampler.Stop()[0]
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("open %.1fs, plan %.1fs, execute %.1fs; %+v\npeak RSS %d MiB (peak RssAnon %d MiB, peak RssFile %d MiB: the mmapped local index); Go heap peak sys %d MiB\n",
			opened.Sub(start).Seconds(), planned.Sub(opened).Seconds(), time.Since(planned).Seconds(), st, memsample.SelfMaxRSS()>>20,
			pk.Anon>>20, pk.File>>20, ms.HeapSys>>20)
	}
}
