package profile

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite" // pure-Go SQLite: checkpoints and integrity checks without cgo
	sqlite3 "modernc.org/sqlite/lib"

	"lifeboat/internal/sqlitedsn"
)

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// isSQLite reports whether the regular file p starts with the SQLite header.
func isSQLite(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [16]byte
	n, _ := f.Read(b[:])
	return n == 16 && bytes.Equal(b[:], sqliteMagic)
}

// errBusy: another connection holds the database, so the checkpoint could
// not finish: a writer is still at work.
var errBusy = errors.New("the database is busy")

// checkpoint folds p's write-ahead log into the database up to its last
// commit and truncates it, and (the pragma reads the database) rolls back
// a hot rollback journal. Run only while no browser process holds p (not
// while one is paused: it may hold the locks). It returns an error
// wrapping errBusy when another connection holds the database.
func checkpoint(ctx context.Context, p string) error {
	db, err := sql.Open("sqlite", sqlitedsn.File(p, false))
	if err != nil {
		return err
	}
	defer db.Close()
	var busy, logFrames, done int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED) {
			return fmt.Errorf("checkpointing %s: %w: %w", p, errBusy, err)
		}
		return fmt.Errorf("checkpointing %s: %w", p, err)
	}
	if busy != 0 {
		return fmt.Errorf("checkpointing %s: %w", p, errBusy)
	}
	return db.Close()
}

// SQLite's locks are POSIX record locks: on the database file, its
// pending, reserved and shared bytes (a connection holds the shared range
// while it reads, and for as long as it is open in exclusive locking
// mode); on the -shm of a database in WAL mode, the write, checkpoint,
// recover and read-mark bytes.
const (
	sqlitePendingByte = 0x40000000
	sqliteLockBytes   = 512 // pending, reserved, and the 510 shared bytes
	shmLockFirst      = 120
	shmLockBytes      = 8
)

// sqliteHeld returns an error wrapping errBusy when another process holds
// any of SQLite's locks on database p or its -shm: a connection is at
// work, as a checkpoint would find it busy. The files are opened
// read-only and no lock is taken (F_OFD_GETLK only asks), so nothing is
// written.
func sqliteHeld(p string) error {
	for _, l := range []struct {
		path        string
		start, size int64
	}{{p, sqlitePendingByte, sqliteLockBytes}, {p + "-shm", shmLockFirst, shmLockBytes}} {
		f, err := os.OpenFile(l.path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, os.ErrNotExist) && l.path != p {
			continue
		}
		if err != nil {
			return fmt.Errorf("checking %s for locks: %w", l.path, err)
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: l.start, Len: l.size}
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk)
		f.Close()
		if err != nil {
			return fmt.Errorf("checking %s for locks: %w", l.path, err)
		}
		if lk.Type != unix.F_UNLCK {
			return fmt.Errorf("checking %s: %w: another process holds a SQLite lock on it", l.path, errBusy)
		}
	}
	return nil
}

// integrity runs PRAGMA integrity_check on p, opened read-only and
// immutable. It returns "" when the database is sound, else the first
// problems SQLite lists.
func integrity(ctx context.Context, p string) (string, error) {
	db, err := sql.Open("sqlite", sqlitedsn.File(p, true))
	if err != nil {
		return "", err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check(5)")
	if err != nil {
		return err.Error(), nil // not a database, or a damaged header
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err.Error(), nil
		}
		msgs = append(msgs, s)
	}
	if err := rows.Err(); err != nil {
		return err.Error(), nil
	}
	if len(msgs) == 1 && msgs[0] == "ok" {
		return "", nil
	}
	return strings.Join(msgs, "; "), nil
}
