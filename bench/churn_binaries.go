package bench

import (
	"fmt"
	"os"
	"path/filepath"
)

// ChurnBinaries changes about frac (0 < frac <= 1) of a corpus made by
// GenerateBinaries the way a rebuild and a day's work do: it rebuilds
// frac of the shared libraries (a quarter of each rewritten in place),
// relinks each large browser binary (frac of its bytes rewritten), edits
// lines in frac of the documentation, replaces frac/5 of the browser's
// small files with new ones, appends frac of their size to frac of the
// data files, and adds a module version to the module cache with frac/5
// as many files as it holds. The same seed on the same corpus gives the
// same result.
func ChurnBinaries(dir string, seed uint64, frac float64) (ChurnReport, error) {
	var rep ChurnReport
	if !(frac > 0 && frac <= 1) {
		return rep, fmt.Errorf("churn fraction %v: want more than 0 and at most 1", frac)
	}
	g := newFiller(seed, 0xc4a7b)
	libs, err := g.pickFiles(filepath.Join(dir, LibDir), "", frac)
	if err != nil {
		return rep, err
	}
	for _, p := range libs {
		if err := g.rewrite(p, 0.25, kindCode); err != nil {
			return rep, err
		}
		rep.Edited++
	}
	for _, name := range browserBinaries {
		p := filepath.Join(dir, BrowserDir, name)
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			continue
		}
		if err := g.rewrite(p, frac, kindRandom); err != nil {
			return rep, err
		}
		rep.Edited++
	}
	docs, err := g.pickFiles(filepath.Join(dir, DocDir), "", frac)
	if err != nil {
		return rep, err
	}
	for _, p := range docs {
		if err := editLines(p, g.rng); err != nil {
			return rep, err
		}
		rep.Edited++
	}
	gone, err := g.pickFiles(filepath.Join(dir, BrowserDir, "gen"), ".js", frac/5)
	if err != nil {
		return rep, err
	}
	for i, p := range gone {
		if err := os.Remove(p); err != nil {
			return rep, err
		}
		rep.Deleted++
		q := filepath.Join(dir, BrowserDir, "gen", fmt.Sprintf("rebuilt%d", seed), fmt.Sprintf("gen%05d.js", i))
		if err := g.createChurned(q, 0o644, section{kindText, g.logSize(1<<10, 256<<10, 1), &goWords}); err != nil {
			return rep, err
		}
		rep.Added++
	}
	data, err := g.pickFiles(filepath.Join(dir, DataDir), "", frac)
	if err != nil {
		return rep, err
	}
	for _, p := range data {
		n, err := g.appendTo(p, frac)
		if err != nil {
			return rep, err
		}
		rep.Appended += n
	}
	mods, err := listFiles(filepath.Join(dir, ModCacheDir), ".go")
	if err != nil {
		return rep, err
	}
	if len(mods) > 0 {
		mod := filepath.Join(dir, ModCacheDir, "github.com", "upgrade", fmt.Sprintf("mod@v2.%d.0", seed))
		for i := range count(len(mods), frac/5) {
			p := filepath.Join(mod, fmt.Sprintf("pkg%d", i/8), fmt.Sprintf("file%05d.go", i))
			if err := g.createChurned(p, 0o444, section{kindText, g.logSize(256, 16<<10, 1), &goWords}); err != nil {
				return rep, err
			}
			rep.Added++
		}
	}
	return rep, stampChurnedDirs(dir)
}

// pickFiles returns frac of the files under dir whose names end in ext,
// chosen by g's stream, sorted.
func (g *filler) pickFiles(dir, ext string, frac float64) ([]string, error) {
	files, err := listFiles(dir, ext)
	if err != nil {
		return nil, err
	}
	return pick(g.rng, files, frac), nil
}

// createChurned is create with the churn's mtime.
func (g *filler) createChurned(p string, mode os.FileMode, secs ...section) error {
	if err := g.create(p, mode, secs...); err != nil {
		return err
	}
	return os.Chtimes(p, churnTime, churnTime)
}

// rewrite overwrites frac of the file at p in place, at a random offset,
// with new bytes of kind.
func (g *filler) rewrite(p string, frac float64, kind int) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	n := max(1, int(float64(fi.Size())*frac))
	off := g.rng.Int64N(fi.Size() - int64(n) + 1)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err = f.Seek(off, 0); err == nil {
		err = g.write(f, []section{{kind, n, nil}})
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Chtimes(p, churnTime, churnTime)
}

// appendTo appends frac of the file's size (at least 4 KiB) of the kind
// of bytes it holds, and returns how many.
func (g *filler) appendTo(p string, frac float64) (int64, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	s := section{kindText, max(4096, int(float64(fi.Size())*frac)), &csvWords}
	switch filepath.Ext(p) {
	case ".json":
		s.vocab = &jsonWords
	case ".f32":
		s = section{kindFloat, s.n &^ 7, nil}
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	err = g.write(f, []section{s})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	return int64(s.n), os.Chtimes(p, churnTime, churnTime)
}
