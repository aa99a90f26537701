package recovery

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"lifeboat/snapshot/restore"
)

// A recovery operation's restore builds the checkpoint into a local tree
// of the server that drives it, <StateDir>/recovery/<operation>, through a
// staging directory beside it (.lifeboat-restore-<hex>). Only the restore
// step reads the tree, and it restores afresh each time it runs; after it,
// the steps read the replacement. So a server that stops driving an
// operation (another server took it over) removes its tree of it, and a
// server that starts, before it drives any, removes the trees of every
// operation and the staging directories no live restore holds. A tree a
// repair hold names as its source (kept for an operator) is never removed
// here.

// localTree is this server's local tree of operation id.
func (s *Service) localTree(id string) string { return filepath.Join(s.localTrees(), id) }

func (s *Service) localTrees() string { return filepath.Join(s.cfg.StateDir, "recovery") }

// heldTrees are the local trees repair holds name, resolved ones
// included; ok is false when the holds cannot be read.
func (s *Service) heldTrees() (held map[string]bool, ok bool) {
	holds, err := s.AllHolds()
	if err != nil {
		s.log.Error("reading repair holds: the local trees of recovery operations stay", "err", err)
		return nil, false
	}
	held = map[string]bool{}
	for _, h := range holds {
		held[filepath.Clean(h.Source)] = true
	}
	return held, true
}

// dropLocalTree removes this server's local tree of operation id, which
// it no longer drives, unless a repair hold names it or a restore (in any
// process on this state directory) holds its lock.
func (s *Service) dropLocalTree(id string, held map[string]bool) {
	dir := s.localTree(id)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) || held[dir] {
		return
	}
	lk, err := s.locks.TryLock(dir, "clean-up") // a restore into it holds it
	if err != nil {
		s.log.Info("the local tree of a recovery operation stays: a restore may use it", "operation", id, "path", dir, "err", err)
		return
	}
	defer lk.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		s.log.Warn("removing the local tree of a recovery operation this server does not drive", "operation", id, "path", dir, "err", err)
		return
	}
	s.log.Info("removed the local tree of a recovery operation this server does not drive", "operation", id, "path", dir)
}

// stoppedDriving removes the local tree of operation id once this server
// lost it to another.
func (s *Service) stoppedDriving(id string) {
	if held, ok := s.heldTrees(); ok {
		s.dropLocalTree(id, held)
	}
}

// cleanLocalTrees removes, before this service drives any operation, the
// local trees of the operations the store knows (those it will drive
// again restore afresh) and the staging directories of restores no
// process runs; directories that name no operation are left.
func (s *Service) cleanLocalTrees() {
	dir := s.localTrees()
	found, err := restore.CleanStaging(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Warn("cleaning up interrupted restores of recovery operations", "err", err)
	}
	for _, f := range found {
		if f.Removed {
			s.log.Info("removed the staging directory of an interrupted restore", "path", f.Path)
		} else {
			s.log.Warn("the staging directory of an interrupted restore stays", "path", f.Path, "why", f.Why)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		s.log.Warn("listing the local trees of recovery operations", "path", dir, "err", err)
		return
	}
	held, ok := s.heldTrees()
	if !ok {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := s.store.Operation(e.Name()); err != nil {
			continue // names no operation (or the store cannot tell): left
		}
		s.dropLocalTree(e.Name(), held)
	}
}
