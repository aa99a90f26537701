package bench

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"lifeboat/profile/fixture"
)

// Scale sizes a corpus. Zero fields leave their part out.
type Scale struct {
	SourceFiles int // small text files in a source tree
	DepFiles    int // tiny files in a dependency folder
	BinaryMiB   int // one incompressible file (model weights)
	LogKiB      int // an append-only log

	GitPackMiB int   // a git-like pack of compressible binary objects
	BlobsMiB   []int // more incompressible blobs (archives, weights), one per entry
	RecordMiB  int   // a large append-only file of compressible records
	Databases  int   // SQLite databases (real ones, modernc.org/sqlite)
	DBRows     int   // rows per database, about 2 KiB each
	Profile    bool  // a Chromium profile (CorpusProfile) at ProfileRel
	// LocalStorage writes the profile's localStorage (nil: none). The
	// presets of bench/harness set localstorage.LevelDB.
	LocalStorage fixture.LocalStorage
}

// SmallScale is a corpus of a few MiB for demos and tests.
var SmallScale = Scale{SourceFiles: 200, DepFiles: 300, BinaryMiB: 4, LogKiB: 256}

// epoch is the mtime every generated file gets, so corpora are identical.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var words = []string{"func", "return", "if", "err", "nil", "package", "import", "type", "struct", "for", "range", "go", "defer", "select", "case", "default", "var", "const", "map", "chan"}

// Generate writes a workspace-like tree under dir: a source tree of text
// files, a dependency folder of tiny files, an incompressible binary, a log,
// a symlink, an empty file and an executable script.
func Generate(dir string, seed uint64, s Scale) error {
	rng := rand.New(rand.NewPCG(seed, 0x11fe))
	write := func(rel string, data []byte, mode os.FileMode) error {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		return os.Chtimes(p, epoch, epoch)
	}
	for i := range s.SourceFiles {
		rel := fmt.Sprintf("src/pkg%02d/file%04d.go", i%17, i)
		if err := write(rel, sourceText(rng, 1+rng.IntN(8)<<10), 0o644); err != nil {
			return err
		}
	}
	for i := range s.DepFiles {
		rel := depPath(i, s.DepFiles)
		if err := write(rel, sourceText(rng, 64+rng.IntN(512)), 0o644); err != nil {
			return err
		}
	}
	bin := make([]byte, s.BinaryMiB<<20)
	for i := 0; i+8 <= len(bin); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			bin[i+j] = byte(v >> (8 * j))
		}
	}
	if err := write("models/weights.bin", bin, 0o644); err != nil {
		return err
	}
	if err := write("logs/agent.log", sourceText(rng, s.LogKiB<<10), 0o600); err != nil {
		return err
	}
	if err := write("run.sh", []byte("#!/bin/sh\necho hello from the workspace\n"), 0o755); err != nil {
		return err
	}
	if err := write("empty", nil, 0o644); err != nil {
		return err
	}
	if err := os.Symlink("src/pkg00", filepath.Join(dir, "latest-src")); err != nil {
		return err
	}
	if err := generateMix(dir, seed, rng, s, write); err != nil {
		return err
	}
	return stampAll(dir)
}

// depPath names the i-th of n dependency files: packages of about 25
// files each, as in a node_modules folder.
func depPath(i, n int) string {
	pkgs := max(50, n/25)
	return fmt.Sprintf("node_modules/dep%04d/lib/index%d.js", i%pkgs, i)
}

// stampAll gives every file and directory under dir (not symlinks) the
// fixed epoch mtime, so parts written by libraries are identical too.
func stampAll(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, epoch, epoch)
	})
}

// sourceText returns n bytes of code-like text.
func sourceText(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(8) == 0 {
			b.WriteString("\n\t")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.Bytes()[:n]
}

// Churn changes a workspace the way work does: it edits some source files,
// appends to the log, adds a file and deletes one. It returns how many
// paths it touched.
func Churn(dir string, seed uint64) (int, error) {
	rng := rand.New(rand.NewPCG(seed, 0xc4a7))
	touched := 0
	srcs, _ := filepath.Glob(filepath.Join(dir, "src", "*", "*.go"))
	for i, p := range srcs {
		if i%10 != 0 {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return touched, err
		}
		b = append(append(b[:len(b)/2:len(b)/2], []byte("\n// edited by the agent\n")...), b[len(b)/2:]...)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return touched, err
		}
		touched++
	}
	f, err := os.OpenFile(filepath.Join(dir, "logs", "agent.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return touched, err
	}
	_, err = f.Write(sourceText(rng, 4096))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return touched, err
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "NEW.md"), sourceText(rng, 2000), 0o644); err != nil {
		return touched, err
	}
	if len(srcs) > 1 {
		if err := os.Remove(srcs[1]); err != nil {
			return touched, err
		}
	}
	return touched + 3, nil
}

// TreeStats counts a tree's regular files and their bytes.
type TreeStats struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Stat counts the regular files under dir and their sizes.
func Stat(dir string) (TreeStats, error) {
	var s TreeStats
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		s.Files++
		s.Bytes += info.Size()
		return nil
	})
	return s, err
}
