package inbox

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// PausedQueue is a paused queue of a table, as its row in the pauses table (Table.Pauses)
// records it.
type PausedQueue struct {
	// Queue is the queue's name; empty for the one queue of a table without a Queue column.
	Queue string `json:"queue"`
	// Since is when it was first paused, on the database's clock, in UTC.
	Since time.Time `json:"since"`
}

// Pause pauses queue: from the commit of its row in the pauses table (Table.Pauses), no claim
// of any consumer, in this process or another, takes a row of the queue, on every database and
// in every form, since each claim's own statement asks the pauses table (see docs/pause.md).
// Rows in work when it commits go on: their handlers finish and settle as usual, and so may a
// claim whose statement began before the commit. Publishing goes on, and the rows wait. The
// other queues of the table are not touched.
//
// It is idempotent: pausing a paused queue changes nothing and keeps the time of its first
// pause. A queue no row names yet may be paused: the rows published to it later wait too.
// Where the table has no Queue column the table is one queue, paused by the empty name (a
// name other than empty is refused, as admin's selections refuse a queue there). It fails
// wrapping ErrSchema where the description names no pauses table, or the database has none
// (naming the statement that creates it).
func (c *Client[D]) Pause(ctx context.Context, queue string) error {
	return c.pauseOrResume(ctx, "Pause", queue, func(w sqltext.Pauses) sqltext.Statement { return w.Pause() })
}

// Resume resumes queue, paused by Pause: from the commit, claims take its rows again. It then
// wakes the consumers of the table in this process, and on Postgres where the description asks
// for notifications (Table.Notify) it notifies the table's channel at the commit, which wakes
// consumers elsewhere that listen; others claim at their next poll. Resuming a queue that is not
// paused changes nothing. Where the table has no Queue column it takes the empty name, as Pause
// does. It fails as Pause does.
func (c *Client[D]) Resume(ctx context.Context, queue string) error {
	notify := c.t.Notify && c.d.Caps().Notifies
	err := c.pauseOrResume(ctx, "Resume", queue, func(w sqltext.Pauses) sqltext.Statement {
		if notify {
			return w.ResumeNotifying()
		}
		return w.Resume()
	})
	if err == nil {
		wake(c.t.Name)
	}
	return err
}

// Paused lists the table's paused queues, by name. It fails as Pause does.
func (c *Client[D]) Paused(ctx context.Context) ([]PausedQueue, error) {
	w, err := c.pauses("Paused")
	if err != nil {
		return nil, err
	}
	list := w.List()
	rows, err := c.db.QueryContext(ctx, list.SQL, list.Bind(nil, &sqltext.Values{Table: c.t.Name})...)
	if err != nil {
		return nil, c.pausesFailed(ctx, "Paused", w, err)
	}
	defer rows.Close()
	out := []PausedQueue{}
	for rows.Next() {
		var p PausedQueue
		var since any
		if err := rows.Scan(&p.Queue, &since); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its paused queues: %w", err)
		}
		if p.Since, err = dialect.ScannedTime(since); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its paused queues: the time queue %q was paused: %w", p.Queue, err)
		}
		p.Since = p.Since.UTC()
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its paused queues: %w", err)
	}
	return out, nil
}

// pauseOrResume runs the statement build makes of the pauses table for queue (call names the
// method): on SQLite under this process's writer lock, as publishing does.
func (c *Client[D]) pauseOrResume(ctx context.Context, call, queue string, build func(sqltext.Pauses) sqltext.Statement) error {
	w, err := c.pauses(call)
	if err != nil {
		return err
	}
	if c.t.Queue == "" && queue != "" {
		return sentinel.Errorf(nil, sentinel.Table(c.t.Name), "%s of queue %q: the description has no Queue column, so the table is one queue: %s it by the empty name", call, queue, strings.ToLower(call))
	}
	st := build(w)
	v := &sqltext.Values{Table: c.t.Name, Queue: queue, Channel: NotifyChannel(c.t.Name)}
	if c.d.Caps().OneWriter {
		mu := sqlitewriter.For(c.db)
		mu.Lock()
		defer mu.Unlock()
	}
	if _, err := c.db.ExecContext(ctx, st.SQL, st.Bind(nil, v)...); err != nil {
		return c.pausesFailed(ctx, call, w, err)
	}
	return nil
}

// pauses is the builder of the statements over the description's pauses table; it fails,
// wrapping ErrSchema, where the description names none.
func (c *Client[D]) pauses(call string) (sqltext.Pauses, error) {
	if c.t.Pauses == "" {
		return sqltext.Pauses{}, sentinel.Errorf(ErrSchema, sentinel.Table(c.t.Name), "%s needs a pauses table, which the description does not name: set inbox.Table.Pauses to inbox.PausesTable (%q) and create it with `inbox schema -pauses -apply`", call, PausesTable)
	}
	q, err := c.t.Quote(c.d)
	if err != nil {
		return sqltext.Pauses{}, err
	}
	return sqltext.New(c.d.Caps(), sqltext.Table(q)).Pauses(), nil
}

// pausesFailed is the error of call, whose statement over the pauses table failed with err: the
// connection's where it failed or the server answers none, otherwise ErrSchema naming the
// statement that creates the pauses table where reading it fails too.
func (c *Client[D]) pausesFailed(ctx context.Context, call string, w sqltext.Pauses, err error) error {
	return c.sideFailed(ctx, call, err, []string{w.Check().SQL}, func(checkErr error) error {
		return sentinel.Errorf(ErrSchema, sentinel.Table(c.t.Name), "%s: its pauses table %q (inbox.Table.Pauses) cannot be read (%v): create it with `inbox schema -pauses -apply`, or run: %s", call, c.t.Pauses, checkErr, w.Create())
	})
}

// PausesSchema returns the statement that creates, where it is not there, the pauses table t
// names (Table.Pauses) on d's database; one table serves every job table that names it. It
// fails, wrapping ErrSchema, where t names none or a name d would not keep.
func PausesSchema(d dialect.Dialect, t Table) (string, error) {
	if t.Pauses == "" {
		return "", sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "the description names no pauses table: set inbox.Table.Pauses (inbox.PausesTable)")
	}
	q, err := t.Quote(d)
	if err != nil {
		return "", err
	}
	return sqltext.New(d.Caps(), sqltext.Table(q)).Pauses().Create(), nil
}

// refuseIfPaused fails with ErrPaused, where the client refuses paused queues
// (RefusingPaused), when a queue msgs name is paused, read through q (the pool, or the
// caller's transaction).
func (c *Client[D]) refuseIfPaused(ctx context.Context, q Tx, msgs []Message) error {
	if !c.refusePaused {
		return nil
	}
	w, err := c.pauses("RefusingPaused")
	if err != nil {
		return err
	}
	since := w.Since()
	seen := map[string]bool{}
	for _, m := range msgs {
		queue := m.Queue
		if c.t.Queue == "" {
			queue = ""
		}
		if seen[queue] {
			continue
		}
		seen[queue] = true
		var at any
		switch err := q.QueryRowContext(ctx, since.SQL, since.Bind(nil, &sqltext.Values{Table: c.t.Name, Queue: queue})...).Scan(&at); {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return c.pausesFailed(ctx, "publishing (RefusingPaused)", w, err)
		}
		t, _ := dialect.ScannedTime(at)
		return sentinel.Errorf(ErrPaused, sentinel.Queue(c.t.Name, queue), "the queue is paused (since %s), so nothing was published: resume it (Client.Resume, inbox resume), or publish without RefusingPaused to queue the rows behind the pause", t.Format(time.RFC3339))
	}
	return nil
}

// sideFailed is the error of call, whose statement over a side table failed with err: the
// connection's where it failed or the server answers none; missing's where one of checks (reads
// of the side tables' columns) fails too; otherwise err.
func (c *Client[D]) sideFailed(ctx context.Context, call string, err error, checks []string, missing func(checkErr error) error) error {
	where := sentinel.Table(c.t.Name)
	if ctx.Err() != nil || dialect.ConnectionFailed(err) {
		return sentinel.Errorf(nil, where, "%s: %w", call, err)
	}
	if pingErr := c.db.PingContext(ctx); pingErr != nil {
		return sentinel.Errorf(nil, where, "%s: the server answers no connection: %w", call, errors.Join(err, pingErr))
	}
	for _, check := range checks {
		rows, checkErr := c.db.QueryContext(ctx, check)
		if checkErr != nil {
			return missing(checkErr)
		}
		rows.Close()
	}
	return sentinel.Errorf(nil, where, "%s: %w", call, err)
}
