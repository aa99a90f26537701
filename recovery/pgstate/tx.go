package pgstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"lifeboat/recovery/statedb"
)

// table is where a kind of record lives; bytea keys are client-chosen
// (idempotency keys), text keys are ids lifeboat checks or makes.
var tables = [...]struct {
	name, key string
	bytea     bool
}{
	statedb.Workspaces: {"workspaces", "id", false},
	statedb.Operations: {"operations", "id", false},
	statedb.Holds:      {"repair_holds", "id", false},
	statedb.Restarts:   {"process_restarts", "key", true},
	statedb.Pending:    {"pending", "key", true},
}

type pgTx struct {
	ctx context.Context
	tx  pgx.Tx
}

func keyArg(k statedb.Kind, key string) any {
	if tables[k].bytea {
		return []byte(key)
	}
	return key
}

func (t pgTx) Get(k statedb.Kind, key string) ([]byte, error) {
	tb := tables[k]
	var body string
	err := t.tx.QueryRow(t.ctx, `SELECT body::text FROM `+tb.name+` WHERE `+tb.key+` = $1`, keyArg(k, key)).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(body), nil
}

func (t pgTx) Put(k statedb.Kind, r statedb.Record) error {
	body := string(r.Body)
	var err error
	switch k {
	case statedb.Workspaces:
		_, err = t.tx.Exec(t.ctx, `INSERT INTO workspaces (id, body) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body`, r.Key, body)
	case statedb.Operations:
		_, err = t.tx.Exec(t.ctx, `INSERT INTO operations (id, workspace, idempotency_key, active, body) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (id) DO UPDATE SET workspace = EXCLUDED.workspace, idempotency_key = EXCLUDED.idempotency_key,
				active = EXCLUDED.active, body = EXCLUDED.body`,
			r.Key, r.Workspace, []byte(r.IdemKey), r.Active, body)
	default:
		tb := tables[k]
		_, err = t.tx.Exec(t.ctx, `INSERT INTO `+tb.name+` (`+tb.key+`, workspace, body) VALUES ($1, $2, $3)
			ON CONFLICT (`+tb.key+`) DO UPDATE SET workspace = EXCLUDED.workspace, body = EXCLUDED.body`, keyArg(k, r.Key), r.Workspace, body)
	}
	return err
}

func (t pgTx) Delete(k statedb.Kind, key string) error {
	tb := tables[k]
	_, err := t.tx.Exec(t.ctx, `DELETE FROM `+tb.name+` WHERE `+tb.key+` = $1`, keyArg(k, key))
	return err
}

func (t pgTx) List(k statedb.Kind, fn func(key string, body []byte) error) error {
	tb := tables[k]
	order := tb.key
	if !tb.bytea {
		order += ` COLLATE "C"`
	}
	// Read every row first: fn may run statements of its own.
	rows, err := t.tx.Query(t.ctx, `SELECT `+tb.key+`, body::text FROM `+tb.name+` ORDER BY `+order)
	if err != nil {
		return err
	}
	type kv struct {
		k string
		v string
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv, error) {
		var x kv
		if tb.bytea {
			var k []byte
			err := r.Scan(&k, &x.v)
			x.k = string(k)
			return x, err
		}
		return x, r.Scan(&x.k, &x.v)
	})
	if err != nil {
		return err
	}
	for _, x := range all {
		if err := fn(x.k, []byte(x.v)); err != nil {
			return err
		}
	}
	return nil
}

func (t pgTx) OperationByKey(idem string) (string, error) {
	var id string
	err := t.tx.QueryRow(t.ctx, `SELECT id FROM operations WHERE idempotency_key = $1`, []byte(idem)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

func (t pgTx) PutCheckpoint(ws string, unixNano int64, snapshot string, body []byte, keep int) error {
	if _, err := t.tx.Exec(t.ctx, `INSERT INTO checkpoints (workspace, time_ns, snapshot, body) VALUES ($1, $2, $3, $4)
		ON CONFLICT (workspace, time_ns, snapshot) DO UPDATE SET body = EXCLUDED.body`, ws, unixNano, snapshot, string(body)); err != nil {
		return err
	}
	_, err := t.tx.Exec(t.ctx, `DELETE FROM checkpoints WHERE workspace = $1 AND (time_ns, snapshot) IN (
		SELECT time_ns, snapshot FROM checkpoints WHERE workspace = $1 ORDER BY time_ns DESC, snapshot COLLATE "C" DESC OFFSET $2)`, ws, keep)
	return err
}

func (t pgTx) Checkpoints(ws string, fn func(body []byte) error) error {
	rows, err := t.tx.Query(t.ctx, `SELECT body::text FROM checkpoints WHERE workspace = $1 ORDER BY time_ns, snapshot COLLATE "C"`, ws)
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, b := range all {
		if err := fn([]byte(b)); err != nil {
			return err
		}
	}
	return nil
}

func (t pgTx) DeleteWorkspace(ws string) error {
	for _, q := range []string{`DELETE FROM workspaces WHERE id = $1`, `DELETE FROM checkpoints WHERE workspace = $1`, `DELETE FROM pending WHERE workspace = $1`} {
		if _, err := t.tx.Exec(t.ctx, q, ws); err != nil {
			return err
		}
	}
	return nil
}

func (t pgTx) CheckLease(name, owner string, epoch uint64) error {
	var o string
	var e int64
	err := t.tx.QueryRow(t.ctx, `SELECT owner, epoch FROM leases WHERE name = $1`, name).Scan(&o, &e)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && (o != owner || uint64(e) != epoch) {
		return fmt.Errorf("%s: %w", name, statedb.ErrLeaseLost)
	}
	return err
}
