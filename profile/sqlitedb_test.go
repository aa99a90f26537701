package profile

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
)

// openDB opens an SQLite file for a test, through the driver and DSN the
// package uses.
func openDB(ctx context.Context, p string, ro bool) (*sql.DB, *sql.Conn, error) {
	db, err := sql.Open("sqlite", sqliteDSN(p, ro))
	if err != nil {
		return nil, nil, err
	}
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, c, nil
}

// writeDB creates an SQLite database at p, in WAL mode when wal, and runs
// stmts in it.
func writeDB(ctx context.Context, p string, wal bool, stmts []string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	db, c, err := openDB(ctx, p, false)
	if err != nil {
		return err
	}
	defer db.Close()
	defer c.Close()
	mode := "TRUNCATE"
	if wal {
		mode = "WAL"
	}
	if _, err := c.ExecContext(ctx, "PRAGMA journal_mode="+mode); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%.40s: %w", s, err)
		}
	}
	return nil
}
