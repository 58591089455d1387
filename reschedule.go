package inbox

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Reschedule moves the queued row id to run at at: its retry_after becomes at, as Message.RunAt
// sets it (a time at or before the client's now makes it due at once; a time past the end of
// year 9999 is refused; the zero time is refused). A queued row is neither processed nor dead
// and held by no consumer. Its attempt and last error are kept. It needs the table's RetryAfter
// column (ErrSchema).
//
// It never waits for a row a consumer holds: a row another transaction locks is skipped (SKIP
// LOCKED), and the row's state is then read without a lock. It returns, checked with errors.Is:
//   - ErrInWork for a row in work, left unchanged: in the row lock form, a row its consumer's
//     transaction holds (and in every form a row a claim is locking that moment); in the lease
//     form, a row whose lease runs ahead, which it tells only where the description names the
//     lease column (Table.LockedUntil). The advisory form holds its rows by session locks, which
//     the table does not show: a row it holds is moved, and its handler's outcome then decides
//     (an Ack settles it, a retry writes its own retry_after).
//   - ErrSettled for a processed, dead or cancelled row, left unchanged (requeue a dead row to
//     run it again, admin.Requeue; a cancelled one, admin.RequeueCancelled).
//   - ErrNotFound where no row has the id (a settlement deletes a row where the table keeps
//     no ProcessedAt or DeadAt column).
//
// A row it reads as in work may have been let go by the time it returns: the answer holds for
// the moment it read. Time is the client's clock (WithClock), as for Message.Delay.
func (c *Client[D]) Reschedule(ctx context.Context, id int64, at time.Time) error {
	t := c.t
	where := sentinel.Row(t.Name, id)
	if t.RetryAfter == "" {
		return sentinel.Errorf(ErrSchema, where, "Reschedule needs the RetryAfter role, which the description lacks: add the column and name it in inbox.Table.RetryAfter")
	}
	if at.IsZero() {
		return sentinel.Errorf(nil, where, "Reschedule was given the zero time: give the run time (time.Now() for at once)")
	}
	now := clockNow(c.clock)
	runAt, err := runTime(t, "Reschedule's time", at, now)
	if err != nil {
		return err
	}
	q, err := t.Quote(c.d)
	if err != nil {
		return err
	}
	r := sqltext.New(c.d.Caps(), sqltext.Table(q)).Reschedule(q.LockedUntil)
	v := &sqltext.Values{Now: c.d.Time(now), IDs: []int64{id}, At: nil}
	if !runAt.IsZero() {
		v.At = c.d.Time(runAt)
	}
	changed, err := reschedule(ctx, c.db, c.d, r, v)
	if err != nil {
		return sentinel.Errorf(nil, where, "rescheduling: %w", err)
	}
	if changed {
		return nil
	}
	var settled int
	st := r.State()
	switch err := c.db.QueryRowContext(ctx, st.SQL, st.Bind(nil, v)...).Scan(&settled); {
	case errors.Is(err, sql.ErrNoRows):
		return sentinel.Errorf(ErrNotFound, where, "no row has the id: it was never published, or was deleted")
	case err != nil:
		return sentinel.Errorf(nil, where, "rescheduling: reading the row's state: %w", err)
	case settled == 1:
		return sentinel.Errorf(ErrSettled, where, "the row is processed, dead or cancelled, so it was not rescheduled: requeue a dead or cancelled row to run it again")
	}
	return sentinel.Errorf(ErrInWork, where, "a consumer holds the row, so it was not rescheduled: its handler's outcome decides what becomes of it")
}

// RescheduleKey moves the queued row that holds the unique key (Message.UniqueKey) to run at
// at, as Reschedule moves a row by its id, and returns that row's id. The holder is read without
// a lock, then moved by its id: where it settled or was taken in the meantime, the answer is
// Reschedule's (ErrSettled, ErrInWork). No row holding the key is ErrNotFound (a settlement
// frees the key, unless the table keeps it for a window: Table.UniqueWindow). It needs the
// UniqueKey role (ErrSchema).
func (c *Client[D]) RescheduleKey(ctx context.Context, key string, at time.Time) (int64, error) {
	t := c.t
	where := sentinel.Table(t.Name)
	if t.UniqueKey == "" {
		return 0, sentinel.Errorf(ErrSchema, where, "RescheduleKey needs the UniqueKey role, which the description lacks: add the column and name it in inbox.Table.UniqueKey")
	}
	q, err := t.Quote(c.d)
	if err != nil {
		return 0, err
	}
	holder := sqltext.New(c.d.Caps(), sqltext.Table(q)).Unique(q.LockedUntil).Holder()
	var id int64
	switch err := c.db.QueryRowContext(ctx, holder.SQL, holder.Bind(nil, &sqltext.Values{UniqueKey: key})...).Scan(&id); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, sentinel.Errorf(ErrNotFound, where, "no row holds the unique key %q: it was never published, or its row settled", key)
	case err != nil:
		return 0, sentinel.Errorf(nil, where, "rescheduling the row of unique key %q: reading its id: %w", key, err)
	}
	return id, c.Reschedule(ctx, id, at)
}

// reschedule changes the row v names where it is queued, and reports whether it did: on a
// database with row locks, it locks the row in a transaction, skipping it where another holds it,
// and changes it there; on SQLite, where no statement holds a row, it changes it in one
// statement under this process's writer lock, as publishing does.
func reschedule(ctx context.Context, db *sql.DB, d dialect.Dialect, r sqltext.Reschedule, v *sqltext.Values) (bool, error) {
	change := r.Change()
	if !d.Caps().SkipLocked {
		if d.Caps().OneWriter {
			w := sqlitewriter.For(db)
			w.Lock()
			defer w.Unlock()
		}
		res, err := db.ExecContext(ctx, change.SQL, change.Bind(nil, v)...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	}
	tx, err := d.Begin(ctx, db)
	if err != nil {
		return false, err
	}
	lock := r.Lock()
	var locked int64
	err = tx.QueryRowContext(ctx, lock.SQL, lock.Bind(nil, v)...).Scan(&locked)
	if errors.Is(err, sql.ErrNoRows) {
		return false, tx.Rollback()
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, change.SQL, change.Bind(nil, v)...)
	}
	if err != nil {
		return false, errors.Join(err, tx.Rollback())
	}
	return true, tx.Commit()
}
