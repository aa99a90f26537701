package pgstate

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// channel is the NOTIFY channel of new events.
const channel = "lifeboat_events"

// keepEvents is how many of the newest events the table keeps, for a
// listener that reconnects.
const keepEvents = 10000

// Publish stores the event and notifies every listener. Inserts are
// serialized (an advisory transaction lock), so event ids commit in
// order and a listener reading "after the last id" never skips one.
func (d *DB) Publish(ctx context.Context, origin string, body []byte) error {
	return d.run(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey("events")); err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO events (origin, body) VALUES ($1, $2) RETURNING id`, origin, string(body)).Scan(&id); err != nil {
			return err
		}
		if id%100 == 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM events WHERE id <= $1`, id-keepEvents); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, "")
		return err
	})
}

// Listen delivers, in order, the events other processes publish from now
// on, until ctx ends. A lost connection is made again, and the events
// published meanwhile are delivered from the table.
func (d *DB) Listen(ctx context.Context, origin string, fn func(body []byte)) (<-chan struct{}, error) {
	var last int64
	if err := d.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&last); err != nil {
		return nil, d.wrap(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_ = d.listen(ctx, origin, fn, &last) // the connection went: made again after a pause
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return done, nil
}

func (d *DB) listen(ctx context.Context, origin string, fn func([]byte), last *int64) error {
	pc, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack() // a LISTEN session is not given back to the pool
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+channel); err != nil {
		return err
	}
	for {
		rows, err := conn.Query(ctx, `SELECT id, origin, body::text FROM events WHERE id > $1 ORDER BY id`, *last)
		if err != nil {
			return err
		}
		type ev struct {
			id     int64
			origin string
			body   string
		}
		evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ev, error) {
			var e ev
			return e, r.Scan(&e.id, &e.origin, &e.body)
		})
		if err != nil {
			return err
		}
		for _, e := range evs {
			*last = e.id
			if e.origin != origin {
				fn([]byte(e.body))
			}
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
	}
}
