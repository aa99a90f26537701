package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/zeebo/blake3"

	"lifeboat/blob"
	"lifeboat/chunk"
	"lifeboat/repo"
)

func newDebugCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "debug", Short: "Low-level tools for developers"}
	cmd.AddCommand(newRoundtripCommand(g))
	return cmd
}

type roundtripMessage struct {
	MessageType string  `json:"message_type"` // "roundtrip"
	Files       int     `json:"files"`
	Bytes       int64   `json:"bytes"`
	Chunks      int     `json:"chunks"`
	NewChunks   int     `json:"new_chunks"`
	NewBytes    int64   `json:"new_bytes"`
	SaveSeconds float64 `json:"save_seconds"`
	LoadSeconds float64 `json:"load_seconds"`
	Verified    bool    `json:"verified"`
}

type fileChunks struct {
	path string
	sum  [32]byte
	ids  []blob.ID
}

func newRoundtripCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "roundtrip PATH",
		Short: "Store every regular file under PATH as workspace blobs, read them back and compare",
		Long: "A check of the repository library until capture exists: every regular file under PATH is chunked and saved " +
			"(deduplicated against what is stored), the repository is flushed, then every file is rebuilt from its blobs and compared with its content hash.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withRepo(ctx, true, func(r *repo.Repository) (err error) {
				var paths []string
				err = filepath.WalkDir(args[0], func(p string, d fs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					if d.Type().IsRegular() {
						paths = append(paths, p)
					}
					return nil
				})
				if err != nil {
					return err
				}
				m := roundtripMessage{MessageType: "roundtrip", Files: len(paths)}
				start := time.Now()
				files, st, err := saveFiles(ctx, r, paths)
				if err != nil {
					return err
				}
				if err := r.Flush(ctx); err != nil {
					return err
				}
				m.SaveSeconds = time.Since(start).Seconds()
				m.Bytes, m.Chunks, m.NewChunks, m.NewBytes = st.Bytes, st.Chunks, st.New, st.NewBytes
				start = time.Now()
				h := blake3.New()
				for _, f := range files {
					h.Reset()
					if _, err := r.LoadStream(ctx, blob.Workspace, f.ids, h); err != nil {
						return fmt.Errorf("%s: %w", f.path, err)
					}
					if [32]byte(h.Sum(nil)) != f.sum {
						return fmt.Errorf("%w: %s reads back different content", repo.ErrCorrupt, f.path)
					}
				}
				m.LoadSeconds, m.Verified = time.Since(start).Seconds(), true
				g.out.emit(m, func(w io.Writer) {
					fmt.Fprintf(w, "%d files, %d bytes in %d chunks (%d new, %d new bytes)\nsaved in %.2fs, read back and verified in %.2fs\n",
						m.Files, m.Bytes, m.Chunks, m.NewChunks, m.NewBytes, m.SaveSeconds, m.LoadSeconds)
				})
				return nil
			})
		},
	}
}

// saveFiles saves the files with one chunker per CPU.
func saveFiles(ctx context.Context, r *repo.Repository, paths []string) ([]fileChunks, repo.StreamStats, error) {
	out := make([]fileChunks, len(paths))
	var mu sync.Mutex
	var total repo.StreamStats
	var firstErr error
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := r.Chunker(blob.Workspace)
			h := blake3.New() // reused: a hasher is ~10 KiB
			for i := range next {
				if err == nil {
					var st repo.StreamStats
					h.Reset()
					out[i], st, err = saveFile(ctx, r, c, h, paths[i])
					mu.Lock()
					total.Bytes, total.Chunks, total.New, total.NewBytes = total.Bytes+st.Bytes, total.Chunks+st.Chunks, total.New+st.New, total.NewBytes+st.NewBytes
					mu.Unlock()
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, total, firstErr
}

func saveFile(ctx context.Context, r *repo.Repository, c *chunk.Chunker, h *blake3.Hasher, path string) (fileChunks, repo.StreamStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileChunks{}, repo.StreamStats{}, err
	}
	defer f.Close()
	ids, st, err := r.SaveStream(ctx, blob.Workspace, c, io.TeeReader(f, h))
	if err != nil {
		return fileChunks{}, st, fmt.Errorf("%s: %w", path, err)
	}
	return fileChunks{path: path, sum: [32]byte(h.Sum(nil)), ids: ids}, st, nil
}
