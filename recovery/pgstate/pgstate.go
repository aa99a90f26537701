package pgstate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"lifeboat/recovery/statedb"
)

// Options open a PostgreSQL state store.
type Options struct {
	// URL is a postgres:// (or postgresql://) URL or a key=value
	// connection string.
	URL string
	// Password, when set, is used instead of one in URL.
	Password string
	// MaxConns bounds the pool; default 32. Each capture in flight holds
	// one connection (its workspace lock) and, while it promotes, another
	// (the workspace's hold lock); the event listener holds one.
	MaxConns int32
}

// DB is a PostgreSQL state store.
type DB struct {
	pool   *pgxpool.Pool
	where  string
	secret string // the password, scrubbed from every error text
	id     string
	salt   []byte
}

var _ statedb.DB = (*DB)(nil)

// Open connects, applies missing schema migrations and reads the store's
// id and salt (making them in a new database). A database whose schema
// is newer than this lifeboat's fails with statedb.ErrNewer; an
// unreachable one with statedb.ErrUnavailable.
func Open(ctx context.Context, o Options) (*DB, error) {
	where := Redact(o.URL)
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("state database %s: the URL does not parse: use postgres://USER@HOST:PORT/DATABASE", where)
	}
	if o.Password != "" {
		cfg.ConnConfig.Password = o.Password
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		// Told apart in pg_stat_activity; the URL's own name wins.
		host, _ := os.Hostname()
		cfg.ConnConfig.RuntimeParams["application_name"] = strings.TrimSpace("lifeboat " + host)
	}
	cfg.MaxConns = o.MaxConns
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 32
	}
	d := &DB{where: where, secret: cfg.ConnConfig.Password}
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, d.wrap(err)
	}
	if err := d.pool.Ping(ctx); err != nil {
		d.pool.Close()
		return nil, d.wrap(err)
	}
	if err := d.migrate(ctx); err != nil {
		d.pool.Close()
		return nil, err
	}
	return d, nil
}

// Redact returns a database URL without its password, for messages.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		return "(a connection string)"
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "REDACTED")
	}
	q := p.Query()
	if q.Has("password") {
		q.Set("password", "REDACTED")
		p.RawQuery = q.Encode()
	}
	return p.String()
}

// wrap turns a database error into one that names the store and never
// the password; connection failures become statedb.ErrUnavailable.
func (d *DB) wrap(err error) error {
	msg := err.Error()
	if len(d.secret) >= 4 { // a shorter one would garble the message, and says little
		msg = strings.ReplaceAll(msg, d.secret, "REDACTED")
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "23505":
		return fmt.Errorf("%w: state database %s: %s", statedb.ErrConflict, d.where, msg)
	case errors.As(err, &pe) && (pe.Code == "28P01" || pe.Code == "28000"):
		return fmt.Errorf("%w: state database %s refused the login: %s (check [state] url and its password source)", statedb.ErrUnavailable, d.where, msg)
	case errors.As(err, &pe) && pe.Code == "3D000": // invalid_catalog_name
		return fmt.Errorf("%w: state database %s does not exist: %s (create it, e.g. `CREATE DATABASE name OWNER user`, or fix the database in [state] url)", statedb.ErrUnavailable, d.where, msg)
	case unreachable(err):
		return fmt.Errorf("%w: %s: %s (check that PostgreSQL runs and accepts connections at the host and port of [state] url)", statedb.ErrUnavailable, d.where, msg)
	case errors.As(err, &pe):
		return fmt.Errorf("state database %s: %s", d.where, msg)
	}
	return err
}

func unreachable(err error) bool {
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}

func (d *DB) migrate(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey("lifeboat/schema")); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS lifeboat_schema (version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM lifeboat_schema`).Scan(&v); err != nil {
			return err
		}
		if v > Schema {
			return fmt.Errorf("%w: state database %s has schema %d, this lifeboat reads %d; upgrade lifeboat", statedb.ErrNewer, d.where, v, Schema)
		}
		for ; v < Schema; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("schema migration %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO lifeboat_schema (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		salt := make([]byte, 32)
		_, _ = rand.Read(salt)
		if _, err := tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('id', $1), ('salt', $2) ON CONFLICT (key) DO NOTHING`,
			[]byte(statedb.NewStoreID()), salt); err != nil {
			return err
		}
		var id []byte
		if err := tx.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'id'`).Scan(&id); err != nil {
			return err
		}
		d.id = string(id)
		return tx.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'salt'`).Scan(&d.salt)
	})
	if err != nil && !errors.Is(err, statedb.ErrNewer) {
		return d.wrap(err)
	}
	return err
}

func (d *DB) ID() string    { return d.id }
func (d *DB) Salt() []byte  { return d.salt }
func (d *DB) Where() string { return d.where }
func (d *DB) Shared() bool  { return true }
func (d *DB) Close() error  { d.pool.Close(); return nil }

// SetSchema records schema version v as applied (tests: a database a newer
// lifeboat migrated).
func (d *DB) SetSchema(ctx context.Context, v int) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO lifeboat_schema (version) VALUES ($1) ON CONFLICT DO NOTHING`, v)
	return err
}

// retries bounds how often a transaction runs again after a conflict.
const retries = 100

// run runs fn in a transaction, again after a serialization failure or
// deadlock (and, a few times, a unique violation a concurrent transaction
// caused: run again, fn sees that transaction's rows).
func (d *DB) run(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, d.pool, opts, fn)
		if err == nil {
			return nil
		}
		var pe *pgconn.PgError
		retry := errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "23505" && attempt < 5)
		if !retry || attempt >= retries || ctx.Err() != nil {
			return d.wrap(err)
		}
		wait := time.Duration(mrand.Int64N(int64(min(attempt+1, 20)) * int64(2*time.Millisecond)))
		select {
		case <-ctx.Done():
			return d.wrap(err)
		case <-time.After(wait):
		}
	}
}

func (d *DB) View(ctx context.Context, fn func(statedb.Tx) error) error {
	return d.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return fn(pgTx{ctx: ctx, tx: tx})
	})
}

func (d *DB) Update(ctx context.Context, fn func(statedb.Tx) error) error {
	return d.run(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		return fn(pgTx{ctx: ctx, tx: tx})
	})
}

// lockKey maps a lock name onto PostgreSQL's 64-bit advisory lock space.
func lockKey(name string) int64 {
	h := sha256.Sum256([]byte("lifeboat/" + name))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// lockCheck is how often a held lock's session is asked whether it is
// still there, and lockCheckTimeout how long the answer may take.
const (
	lockCheck        = 2 * time.Second
	lockCheckTimeout = 10 * time.Second
)

// Lock takes a session advisory lock on a connection of its own, held
// until unlock (or until the connection dies with this process). The
// connection is pinged every lockCheck while the lock is held: when a
// ping fails, the session, and the lock with it, is taken for gone, and
// lost is closed.
func (d *DB) Lock(ctx context.Context, name string, wait bool) (func(), <-chan struct{}, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, d.wrap(err)
	}
	key := lockKey(name)
	got := true
	if wait {
		_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
	} else {
		err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got)
	}
	if err != nil || !got {
		if err != nil {
			_ = conn.Conn().Close(context.Background()) // a cancelled wait may still get the lock: drop the session
		}
		conn.Release()
		if err != nil {
			return nil, nil, d.wrap(err)
		}
		return nil, nil, fmt.Errorf("%s: %w", name, statedb.ErrLocked)
	}
	lost, stop, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(lockCheck)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), lockCheckTimeout)
			err := conn.Ping(ctx)
			cancel()
			if err != nil {
				close(lost)
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-stopped // the connection is the unlock's alone
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
				_ = conn.Conn().Close(ctx) // the session ends, and its locks with it
			}
			conn.Release()
		})
	}, lost, nil
}

func (d *DB) ClaimLease(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (uint64, error) {
	var epoch int64
	err := d.run(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO leases (name, owner, epoch, expires_ns) VALUES ($1, $2, 1, $3)
			ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, epoch = leases.epoch + 1, expires_ns = EXCLUDED.expires_ns
			WHERE leases.owner = EXCLUDED.owner OR leases.expires_ns < $4
			RETURNING epoch`, name, owner, now.Add(ttl).UnixNano(), now.UnixNano()).Scan(&epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s: %w", name, statedb.ErrLeaseHeld)
		}
		return err
	})
	return uint64(epoch), err
}

func (d *DB) RenewLease(ctx context.Context, name, owner string, epoch uint64, now time.Time, ttl time.Duration) error {
	tag, err := d.pool.Exec(ctx, `UPDATE leases SET expires_ns = $4 WHERE name = $1 AND owner = $2 AND epoch = $3`,
		name, owner, int64(epoch), now.Add(ttl).UnixNano())
	if err != nil {
		return d.wrap(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", name, statedb.ErrLeaseLost)
	}
	return nil
}

// ReleaseLease lets the lease lapse at once; the row (and its epoch) stays,
// so epochs only grow.
func (d *DB) ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error {
	_, err := d.pool.Exec(ctx, `UPDATE leases SET expires_ns = 0 WHERE name = $1 AND owner = $2 AND epoch = $3`, name, owner, int64(epoch))
	if err != nil {
		return d.wrap(err)
	}
	return nil
}
