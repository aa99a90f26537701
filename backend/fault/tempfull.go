package fault

import (
	"fmt"
	"sync/atomic"
	"syscall"

	"lifeboat/backend"
)

// TempBackend is a backend that takes temp files (the local one).
type TempBackend interface {
	backend.Backend
	backend.TempSaver
}

// TempFull wraps a TempBackend whose temp files (the packs a repository
// streams) then fail like a full disk once Budget bytes in all have been
// written to them: ErrNoSpace and ENOSPC, after a short write. It tests
// full disks without root's tmpfs.
type TempFull struct {
	TempBackend
	Budget atomic.Int64
}

// CreateTemp returns a temp file that counts its writes against Budget.
func (b *TempFull) CreateTemp() (backend.TempFile, error) {
	f, err := b.TempBackend.CreateTemp()
	if err != nil {
		return nil, err
	}
	return &tempFullFile{TempFile: f, b: b}, nil
}

type tempFullFile struct {
	backend.TempFile
	b *TempFull
}

func (f *tempFullFile) Write(p []byte) (int, error) {
	if left := f.b.Budget.Add(-int64(len(p))); left < 0 {
		n := max(0, len(p)+int(left))
		if _, err := f.TempFile.Write(p[:n]); err != nil {
			return 0, err
		}
		return n, fmt.Errorf("writing %s: %w: %w", f.Name(), backend.ErrNoSpace, syscall.ENOSPC)
	}
	return f.TempFile.Write(p)
}
