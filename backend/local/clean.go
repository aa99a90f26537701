package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CleanTemp removes temp files in tmp/ left by killed or crashed Saves:
// only files named by this package, last modified more than olderThan ago
// and not locked by a live writer (where the OS supports flock). olderThan
// must be far longer than any single Save takes, e.g. an hour: a writer
// releases its lock just before its rename. It returns how many files it
// removed.
func (b *Backend) CleanTemp(ctx context.Context, olderThan time.Duration) (int, error) {
	dir := filepath.Join(b.dir, tmpDir)
	entries, err := readDir(dir)
	if err != nil {
		return 0, fmt.Errorf("local: clean temp files: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, fmt.Errorf("local: clean temp files: %w", err)
		}
		if !strings.HasPrefix(e.Name(), tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		ok, err := removeIfUnlocked(filepath.Join(dir, e.Name()))
		if err != nil {
			return removed, fmt.Errorf("local: clean temp files: %w", err)
		}
		if ok {
			removed++
		}
	}
	return removed, nil
}

// removeIfUnlocked removes p unless a live writer holds its lock.
func removeIfUnlocked(p string) (bool, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := lockFile(f, true); err != nil {
		return false, nil // held by a live writer (or unlockable): leave it
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}
