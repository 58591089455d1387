package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/dialect"
)

// pinnedRowLock is handRowLock's loop without database/sql's transactions, with
// -pinned-rowlock: each worker keeps one connection for the whole drain, with the claim
// and the DELETE prepared on it once, and begins and commits by statement (BEGIN, or START
// TRANSACTION on MySQL and MariaDB, and COMMIT), at the session's level. It measures what
// database/sql's *sql.Tx costs a message (a goroutine per transaction and one per query watching
// its context, a statement bound to each transaction, a pooled connection taken and given back),
// which a loop of the same statements and round trips does not pay.
type pinnedRowLock struct {
	t          *harness.Target
	claimText  string
	deleteText string
	begin      string
	conns      chan *pinnedConn
}

// pinnedConn is a worker's connection and its statements, prepared on it.
type pinnedConn struct {
	conn       *sql.Conn
	claim, del *sql.Stmt
}

func newPinnedRowLock(t *harness.Target, table string, batch, workers int) (*pinnedRowLock, error) {
	q, err := t.D.Quote(table)
	if err != nil {
		return nil, err
	}
	l := &pinnedRowLock{t: t, begin: "START TRANSACTION", conns: make(chan *pinnedConn, workers),
		claimText:  "SELECT id, payload FROM " + q + " ORDER BY id LIMIT " + strconv.Itoa(batch) + " FOR UPDATE SKIP LOCKED",
		deleteText: "DELETE FROM " + q + " WHERE id = ?"}
	if t.Name == "postgres" {
		l.begin, l.deleteText = "BEGIN", "DELETE FROM "+q+" WHERE id = $1"
	}
	return l, nil
}

// conn is a free worker connection, pinned and prepared the first time.
func (l *pinnedRowLock) conn(ctx context.Context) (*pinnedConn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	default:
	}
	conn, err := l.t.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := &pinnedConn{conn: conn}
	if c.claim, err = conn.PrepareContext(ctx, l.claimText); err == nil {
		c.del, err = conn.PrepareContext(ctx, l.deleteText)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("preparing the pinned loop's statements: %w", err)
	}
	return c, nil
}

func (l *pinnedRowLock) step(ctx context.Context, _ int, handle func()) (int, error) {
	c, err := l.conn(ctx)
	if err != nil {
		return 0, err
	}
	n, err := l.one(ctx, c, handle)
	if err != nil {
		// The transaction's state is unknown: ending the session rolls it back.
		dialect.Discard(c.conn)
		return 0, err
	}
	l.conns <- c
	return n, nil
}

// one claims, handles and deletes the rows of one transaction, and commits; 0 when none was
// free.
func (l *pinnedRowLock) one(ctx context.Context, c *pinnedConn, handle func()) (int, error) {
	if _, err := c.conn.ExecContext(ctx, l.begin); err != nil {
		return 0, err
	}
	ids, err := claimedIDs(c.claim.QueryContext(ctx))
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		handle()
		if _, err := c.del.ExecContext(ctx, id); err != nil {
			return 0, err
		}
	}
	if _, err := c.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return 0, err
	}
	return len(ids), nil
}

func (l *pinnedRowLock) close() {
	for {
		select {
		case c := <-l.conns:
			c.claim.Close()
			c.del.Close()
			c.conn.Close()
		default:
			return
		}
	}
}
