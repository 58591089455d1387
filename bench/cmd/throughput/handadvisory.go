package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/dialect"
)

// handAdvisory is the advisory loop a user writes by hand for the advisory form's promise (the
// row's lock taken, the row re-read after the lock, its attempt counted), not from the library's
// statements (-advisory-raw hand): each worker keeps one pinned connection for its whole drain
// and, per message,
//
//	Postgres: SELECT id FROM (SELECT id FROM t ORDER BY id LIMIT 32) c
//	          WHERE pg_try_advisory_lock(id) LIMIT 1;           -- the lock inside the read
//	          UPDATE t SET attempt = attempt + 1 WHERE id = $1        -- unflushed, as the form's
//	            AND set_config('synchronous_commit', 'off', true) = 'off' RETURNING payload, attempt
//	MariaDB:  SELECT id FROM t ORDER BY id LIMIT 32; then GET_LOCK(CONCAT('t-', id), 0) per
//	          candidate until one is held;
//	          UPDATE t SET attempt = attempt + 1 WHERE id = ?; SELECT payload, attempt …
//
// then runs the handler, DELETEs the row in autocommit and releases the lock. A row settled by
// another worker between the read and the lock is gone at the re-read: its lock is released and
// the worker reads again. Single rows only (batch 1).
type handAdvisory struct {
	t  *harness.Target
	pg bool
	// conns are the workers' pinned connections: a step takes one and puts it back, so that
	// the drain's workers keep one each.
	conns                                 chan *sql.Conn
	candidates, lock, take, read, del, un string // read is empty where take returns the row
}

// handWindow is how many due rows the hand loop reads as candidates.
const handWindow = 32

// cellLoop is the raw loop of cell c over table: a hand-written loop where -advisory-raw hand
// (single rows), -pinned-rowlock or -hand-rowlock asks for it, otherwise the loop of the form's
// statements.
func cellLoop(ctx context.Context, t *harness.Target, c *cell, cfg *config, table string) (rawLoop, error) {
	switch {
	case c.form == "advisory" && c.batch == 1 && cfg.advisoryRaw == "hand":
		return newHandAdvisory(t, table, c.workers)
	case c.form == "rowlock" && cfg.pinnedRowLock:
		return newPinnedRowLock(t, table, c.batch, c.workers)
	case c.form == "rowlock" && cfg.handRowLock:
		return newHandRowLock(ctx, t, table, c.batch)
	}
	return newRawLoop(ctx, t, c.form, table, c.batch, cfg.unflushedAcks)
}

// handNote says, in the throughput table's title, that the advisory cells ran the hand loop.
func handNote(cfg *config) string {
	if cfg.advisoryRaw != "hand" {
		return ""
	}
	return ", the advisory cells' raw loop at batch 1 hand-written (-advisory-raw hand)"
}

func newHandAdvisory(t *harness.Target, table string, workers int) (*handAdvisory, error) {
	tbl, err := t.D.Quote(table)
	if err != nil {
		return nil, err
	}
	l := &handAdvisory{t: t, conns: make(chan *sql.Conn, workers)}
	switch t.Name {
	case "postgres":
		l.pg = true
		l.candidates = fmt.Sprintf("SELECT id FROM (SELECT id FROM %s ORDER BY id LIMIT %d) c WHERE pg_try_advisory_lock(id) LIMIT 1", tbl, handWindow)
		// The attempt commits without waiting for the disk, as the form counts it: a crash may
		// forget it, and the crash ends the session, so the row comes back at once either way.
		l.take = "UPDATE " + tbl + " SET attempt = attempt + 1 WHERE id = $1 AND set_config('synchronous_commit', 'off', true) = 'off' RETURNING payload, attempt"
		l.del = "DELETE FROM " + tbl + " WHERE id = $1"
		l.un = "SELECT pg_advisory_unlock($1)"
	case "mysql", "mariadb":
		name := "CONCAT('" + table + "-', ?)"
		l.candidates = fmt.Sprintf("SELECT id FROM %s ORDER BY id LIMIT %d", tbl, handWindow)
		l.lock = "SELECT GET_LOCK(" + name + ", 0)"
		l.take = "UPDATE " + tbl + " SET attempt = attempt + 1 WHERE id = ?"
		l.read = "SELECT payload, attempt FROM " + tbl + " WHERE id = ?"
		l.del = "DELETE FROM " + tbl + " WHERE id = ?"
		l.un = "SELECT RELEASE_LOCK(" + name + ")"
	default:
		return nil, fmt.Errorf("the hand-written advisory loop runs on Postgres, MySQL and MariaDB, not %s", t.Name)
	}
	return l, nil
}

func (l *handAdvisory) step(ctx context.Context, batch int, handle func()) (int, error) {
	if batch != 1 {
		return 0, errors.New("the hand-written advisory loop takes single rows (-batch 1)")
	}
	var conn *sql.Conn
	select {
	case conn = <-l.conns:
	default:
		var err error
		if conn, err = l.t.DB.Conn(ctx); err != nil {
			return 0, err
		}
	}
	n, err := l.one(ctx, conn, handle)
	if err != nil {
		// The lock state is unknown: ending the session releases whatever it held.
		dialect.Discard(conn)
		return 0, err
	}
	l.conns <- conn
	return n, nil
}

// one locks a row, re-reads it and counts its attempt, handles it, deletes it and unlocks it;
// 0 when no row was free or every row it locked was gone.
func (l *handAdvisory) one(ctx context.Context, conn *sql.Conn, handle func()) (int, error) {
	for {
		id, ok, err := l.lockOne(ctx, conn)
		if err != nil || !ok {
			return 0, err
		}
		found, err := l.reread(ctx, conn, id)
		if err != nil {
			return 0, err
		}
		if !found {
			// Settled by another worker between the read and the lock: read again.
			if err := l.unlock(ctx, conn, id); err != nil {
				return 0, err
			}
			continue
		}
		handle()
		if _, err := conn.ExecContext(ctx, l.del, id); err != nil {
			return 0, err
		}
		return 1, l.unlock(ctx, conn, id)
	}
}

// lockOne takes the lock of a due row and returns its id; false when none was free.
func (l *handAdvisory) lockOne(ctx context.Context, conn *sql.Conn) (int64, bool, error) {
	if l.pg {
		var id int64
		err := conn.QueryRowContext(ctx, l.candidates).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return id, err == nil, err
	}
	rows, err := conn.QueryContext(ctx, l.candidates)
	if err != nil {
		return 0, false, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, false, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, err
	}
	for _, id := range ids {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, l.lock, id).Scan(&got); err != nil {
			return 0, false, err
		}
		if got.Valid && got.Int64 == 1 {
			return id, true, nil
		}
	}
	return 0, false, nil
}

// reread re-reads row id after its lock is held and counts its attempt; false when it is gone.
func (l *handAdvisory) reread(ctx context.Context, conn *sql.Conn, id int64) (bool, error) {
	var (
		payload []byte
		attempt int64
	)
	if l.read == "" {
		err := conn.QueryRowContext(ctx, l.take, id).Scan(&payload, &attempt)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	res, err := conn.ExecContext(ctx, l.take, id)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	err = conn.QueryRowContext(ctx, l.read, id).Scan(&payload, &attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (l *handAdvisory) unlock(ctx context.Context, conn *sql.Conn, id int64) error {
	var ok sql.NullBool
	if err := conn.QueryRowContext(ctx, l.un, id).Scan(&ok); err != nil {
		return err
	}
	if !ok.Valid || !ok.Bool {
		return fmt.Errorf("the server did not confirm the unlock of row %d", id)
	}
	return nil
}

// close gives the workers' pinned connections back to the pool.
func (l *handAdvisory) close() {
	for {
		select {
		case conn := <-l.conns:
			conn.Close()
		default:
			return
		}
	}
}
