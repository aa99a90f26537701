package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ChurnReport says what ChurnFraction changed.
type ChurnReport struct {
	Edited    int   `json:"edited"`     // source files with lines replaced and inserted
	Added     int   `json:"added"`      // new files
	Deleted   int   `json:"deleted"`    // removed files
	Appended  int64 `json:"appended"`   // bytes appended to the log and the record file
	DBUpdates int   `json:"db_updates"` // database rows rewritten (their pages change)
}

// Paths is how many paths the churn touched.
func (c ChurnReport) Paths() int { return c.Edited + c.Added + c.Deleted }

// churnTime is the mtime of everything the churn writes: later than
// epoch, and fixed, so two churns of equal corpora give equal trees.
var churnTime = epoch.Add(24 * time.Hour)

// ChurnFraction changes about frac (0 < frac <= 1) of a corpus made by
// Generate the way a working day does: it edits lines in frac of the
// source files, appends frac of their size to the log and to the record
// file, deletes frac/5 of the dependency files and adds as many in a new
// package (an upgrade), adds frac/20 more source files, and rewrites frac
// of the rows of each database. The same seed on the same corpus gives
// the same result.
func ChurnFraction(dir string, seed uint64, frac float64) (ChurnReport, error) {
	var rep ChurnReport
	if !(frac > 0 && frac <= 1) {
		return rep, fmt.Errorf("churn fraction %v: want more than 0 and at most 1", frac)
	}
	rng := rand.New(rand.NewPCG(seed, 0xc4a7f))
	srcs, err := listFiles(filepath.Join(dir, "src"), ".go")
	if err != nil {
		return rep, err
	}
	for _, p := range pick(rng, srcs, frac) {
		if err := editLines(p, rng); err != nil {
			return rep, err
		}
		rep.Edited++
	}
	for i := range count(len(srcs), frac/20) {
		rel := fmt.Sprintf("src/new%d/file%04d.go", seed, i)
		if err := writeChurned(filepath.Join(dir, rel), sourceText(rng, 1+rng.IntN(8)<<10)); err != nil {
			return rep, err
		}
		rep.Added++
	}
	deps, err := listFiles(filepath.Join(dir, "node_modules"), ".js")
	if err != nil {
		return rep, err
	}
	gone := pick(rng, deps, frac/5)
	for _, p := range gone {
		if err := os.Remove(p); err != nil {
			return rep, err
		}
		rep.Deleted++
	}
	for i := range gone {
		rel := fmt.Sprintf("node_modules/dep-upgrade%d/lib/index%d.js", seed, i)
		if err := writeChurned(filepath.Join(dir, rel), sourceText(rng, 64+rng.IntN(512))); err != nil {
			return rep, err
		}
		rep.Added++
	}
	for _, rel := range []string{"logs/agent.log", RecordRel} {
		n, err := appendFraction(filepath.Join(dir, rel), rng, frac)
		if err != nil {
			return rep, err
		}
		rep.Appended += n
	}
	dbs, err := listFiles(filepath.Join(dir, dbDir), ".sqlite")
	if err != nil {
		return rep, err
	}
	for _, p := range dbs {
		n, err := updateRows(context.Background(), p, rng, frac)
		if err != nil {
			return rep, fmt.Errorf("database %s: %w", p, err)
		}
		rep.DBUpdates += n
	}
	return rep, stampChurnedDirs(dir)
}

// stampChurnedDirs gives the directories whose entries the churn changed
// (any not at epoch) the churn's mtime.
func stampChurnedDirs(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil || info.ModTime().Equal(epoch) {
			return err
		}
		return os.Chtimes(p, churnTime, churnTime)
	})
}

// listFiles returns the regular files under dir whose names end in ext,
// sorted; none if dir does not exist.
func listFiles(dir, ext string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(p, ext) {
			out = append(out, p)
		}
		return nil
	})
	if os.IsNotExist(err) {
		return nil, nil
	}
	sort.Strings(out)
	return out, err
}

// count is frac of n, at least 1 when n > 0.
func count(n int, frac float64) int {
	if n == 0 {
		return 0
	}
	return max(1, int(math.Round(float64(n)*frac)))
}

// pick returns count(len(paths), frac) of paths chosen by rng, sorted.
func pick(rng *rand.Rand, paths []string, frac float64) []string {
	idx := rng.Perm(len(paths))[:count(len(paths), frac)]
	sort.Ints(idx)
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = paths[j]
	}
	return out
}

// writeChurned writes a new file with the churn's mtime.
func writeChurned(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return err
	}
	return os.Chtimes(p, churnTime, churnTime)
}

// editLines replaces one line of the file at p and inserts another, in
// place, as an editor saving the file does.
func editLines(p string, rng *rand.Rand) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	lines := bytes.Split(b, []byte("\n"))
	i := rng.IntN(len(lines))
	lines[i] = []byte(fmt.Sprintf("\t%s // edited", sourceText(rng, 40)))
	j := rng.IntN(len(lines) + 1)
	lines = append(lines[:j], append([][]byte{[]byte("\tlog.Println(\"churn\")")}, lines[j:]...)...)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(bytes.Join(lines, []byte("\n")))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Chtimes(p, churnTime, churnTime)
}

// appendFraction appends frac of the file's size (at least 4 KiB) to it:
// text to a log, records to the record file. A missing file is skipped.
func appendFraction(p string, rng *rand.Rand, frac float64) (int64, error) {
	fi, err := os.Stat(p)
	if os.IsNotExist(err) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	n := max(4096, int(float64(fi.Size())*frac))
	var add []byte
	if filepath.Base(p) == filepath.Base(RecordRel) {
		add = make([]byte, 0, n+64)
		for i := uint64(fi.Size() / 64); len(add) < n; i++ {
			add = appendRecord(add, rng, i)
		}
	} else {
		add = sourceText(rng, n)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	_, err = f.Write(add)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	return int64(len(add)), os.Chtimes(p, churnTime, churnTime)
}

// updateRows rewrites the body of frac of the rows of the database at p,
// which rewrites the pages that hold them.
func updateRows(ctx context.Context, p string, rng *rand.Rand, frac float64) (int, error) {
	db, err := sql.Open("sqlite", dbDSN(p))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var rows int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&rows); err != nil {
		return 0, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	n := count(rows, frac)
	for _, id := range rng.Perm(rows)[:n] {
		if _, err := tx.ExecContext(ctx, "UPDATE items SET body = ?, rev = rev + 1 WHERE id = ?", dbBody(rng), id+1); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	if err := db.Close(); err != nil {
		return 0, err
	}
	return n, os.Chtimes(p, churnTime, churnTime)
}
