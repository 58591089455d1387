package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// CancelOutcome is what Cancel did to one row.
type CancelOutcome uint8

// What Cancel did to a row.
const (
	// Cancelled: the row was queued, and is cancelled (stamped cancelled_at) by the call's
	// transaction; no claim takes it once that commits.
	Cancelled CancelOutcome = iota + 1
	// CancelRequested: the row is in work, and the request is recorded (in inbox_cancels, by the
	// call's transaction); the consumer that holds the row cancels its handler's context within
	// its Config.CancelPoll, and settles the row as cancelled.
	CancelRequested
	// AlreadyProcessed, AlreadyDead, AlreadyCancelled: the row had settled, and is unchanged.
	AlreadyProcessed
	AlreadyDead
	AlreadyCancelled
	// NotFound: no row has the id (never published, or deleted: an Ack deletes a row where the
	// table has no ProcessedAt column).
	NotFound
)

func (o CancelOutcome) String() string {
	switch o {
	case Cancelled:
		return "cancelled"
	case CancelRequested:
		return "cancel requested"
	case AlreadyProcessed:
		return "already processed"
	case AlreadyDead:
		return "already dead"
	case AlreadyCancelled:
		return "already cancelled"
	case NotFound:
		return "not found"
	}
	return fmt.Sprintf("CancelOutcome(%d)", uint8(o))
}

// CancelResult is what Cancel did to the row of ID.
type CancelResult struct {
	ID      int64
	Outcome CancelOutcome
	table   string // the table's name, for Err
}

// Err is nil where the row was cancelled or its cancel requested; otherwise an error that names
// the row and wraps ErrSettled (processed, dead or cancelled before) or ErrNotFound.
func (r CancelResult) Err() error {
	switch r.Outcome {
	case Cancelled, CancelRequested:
		return nil
	case NotFound:
		return sentinel.Errorf(ErrNotFound, r.where(), "no row has the id: it was never published, or was deleted")
	}
	return sentinel.Errorf(ErrSettled, r.where(), "the row is %s, so it was not cancelled", r.Outcome)
}

// where names the row, and its table where the result has it.
func (r CancelResult) where() string {
	if r.table == "" {
		return fmt.Sprintf("row %d", r.ID)
	}
	return sentinel.Row(r.table, r.ID)
}

// Cancel cancels the rows of ids in table t, in one transaction of its own, and returns what
// it did to each, in the order of ids. It needs the table's CancelledAt column (ErrSchema).
//
// It never waits for a row a consumer holds. A queued row (neither processed, dead nor
// cancelled, and held by no consumer) is stamped cancelled_at at once: no claim takes it after
// the commit (Cancelled). A row in work is left to its consumer: the request is recorded in
// inbox_cancels (`inbox schema -cancels` creates it), the consumer cancels the handler's
// context with the cause ErrCancelled within its Config.CancelPoll, and the row settles as
// cancelled (CancelRequested). What is in work is per form: in the row lock form a row a
// transaction locks (skipped by SKIP LOCKED); in the lease form a row whose lease runs ahead,
// which Cancel tells only where the description names the lease column (Table.LockedUntil).
// The advisory form's session locks do not show in the table: a row it holds is stamped at once
// (Cancelled), and its consumer tells the handler at its next poll all the same. A settled row
// is unchanged and reported as it is (AlreadyProcessed, AlreadyDead, AlreadyCancelled), and an
// unknown id as NotFound: CancelResult.Err turns these into errors.
//
// The answer holds for the moment the row was read: a row answered CancelRequested may have
// settled by then, when its consumer deletes the request (a processed row is then stamped
// cancelled_at too, to say that a cancel was asked after it succeeded). Time is the host's.
func Cancel(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, ids ...int64) ([]CancelResult, error) {
	return cancelOwn(ctx, db, d, t, hostClock{}, ids)
}

// CancelTx is Cancel in the caller's transaction tx, which it commits or rolls back: every
// stamp and request is undone by its rollback. Where the database has row locks (Postgres,
// MySQL, MariaDB), a row it cancels stays locked by tx until it ends, and a row tx has already
// locked is cancelled by it.
func CancelTx(ctx context.Context, tx Tx, d dialect.Dialect, t Table, ids ...int64) ([]CancelResult, error) {
	return cancelIn(ctx, tx, d, t, hostClock{}, ids)
}

// Cancel is the package's Cancel over the client's table, on the client's clock.
func (c *Client[D]) Cancel(ctx context.Context, ids ...int64) ([]CancelResult, error) {
	return cancelOwn(ctx, c.db, c.d, c.t, c.clock, ids)
}

// CancelTx is the package's CancelTx over the client's table, on the client's clock.
func (c *Client[D]) CancelTx(ctx context.Context, tx Tx, ids ...int64) ([]CancelResult, error) {
	return cancelIn(ctx, tx, c.d, c.t, c.clock, ids)
}

// cancelOwn runs cancelIn in a transaction of its own, which it commits; on SQLite under this
// process's writer lock, as publishing does.
func cancelOwn(ctx context.Context, db *sql.DB, d dialect.Dialect, t Table, clock Clock, ids []int64) ([]CancelResult, error) {
	if err := cancelCheck(t); err != nil {
		return nil, err
	}
	if d.Caps().OneWriter {
		w := sqlitewriter.For(db)
		w.Lock()
		defer w.Unlock()
	}
	tx, err := d.Begin(ctx, db)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(t.Name), "cancelling: %w", err)
	}
	out, err := cancelIn(ctx, tx, d, t, clock, ids)
	if err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Rows(t.Name, ids), "cancelling: committing: %w", err)
	}
	return out, nil
}

// cancelCheck refuses a table Cancel cannot cancel in.
func cancelCheck(t Table) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if t.CancelledAt == "" {
		return sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "Cancel needs the CancelledAt role, which the description lacks: add a nullable timestamp column and name it in inbox.Table.CancelledAt")
	}
	return nil
}

// cancelIn cancels each of ids in tx (see Cancel).
func cancelIn(ctx context.Context, tx Tx, d dialect.Dialect, t Table, clock Clock, ids []int64) ([]CancelResult, error) {
	if err := cancelCheck(t); err != nil {
		return nil, err
	}
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	x := sqltext.New(d.Caps(), sqltext.Table(q)).Cancels(q.LockedUntil)
	now := clockNow(clock)
	out := make([]CancelResult, len(ids))
	for i, id := range ids {
		o, err := cancelOne(ctx, tx, d, x, &sqltext.Values{Now: d.Time(now), At: d.Time(now), Table: t.Name, IDs: []int64{id}})
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Row(t.Name, id), "cancelling: %w", err)
		}
		out[i] = CancelResult{ID: id, Outcome: o, table: t.Name}
	}
	return out, nil
}

// cancelOne cancels the row v names in tx: it stamps it where it is queued, and records a
// request where it is in work (cancelQueued).
func cancelOne(ctx context.Context, tx Tx, d dialect.Dialect, x sqltext.Cancels, v *sqltext.Values) (CancelOutcome, error) {
	o, err := cancelQueued(ctx, tx, d, x, v)
	if o != 0 || err != nil {
		return o, err
	}
	req := x.Request()
	if _, err := tx.ExecContext(ctx, req.SQL, req.Bind(nil, v)...); err != nil {
		return 0, fmt.Errorf("recording the request in %s (`inbox schema -cancels` creates it): %w", sqltext.CancelsTable, err)
	}
	return CancelRequested, nil
}

// cancelQueued stamps the row v names in tx where it is queued (Cancelled), locking it first
// on a database with row locks, skipping it where another transaction holds it; otherwise it
// reads the row's state: settled (Already…), NotFound, or 0 for a row in work.
func cancelQueued(ctx context.Context, tx Tx, d dialect.Dialect, x sqltext.Cancels, v *sqltext.Values) (CancelOutcome, error) {
	queued := true
	if d.Caps().SkipLocked {
		lock := x.Lock()
		var id int64
		switch err := tx.QueryRowContext(ctx, lock.SQL, lock.Bind(nil, v)...).Scan(&id); {
		case errors.Is(err, sql.ErrNoRows):
			queued = false
		case err != nil:
			return 0, fmt.Errorf("locking the row: %w", err)
		}
	}
	if queued {
		stamp := x.Stamp()
		res, err := tx.ExecContext(ctx, stamp.SQL, stamp.Bind(nil, v)...)
		if err != nil {
			return 0, fmt.Errorf("stamping the row: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return Cancelled, err
		}
	}
	var state int
	st := x.State()
	switch err := tx.QueryRowContext(ctx, st.SQL, st.Bind(nil, v)...).Scan(&state); {
	case errors.Is(err, sql.ErrNoRows):
		return NotFound, nil
	case err != nil:
		return 0, fmt.Errorf("reading the row's state: %w", err)
	}
	switch state {
	case sqltext.StateProcessed:
		return AlreadyProcessed, nil
	case sqltext.StateDead:
		return AlreadyDead, nil
	case sqltext.StateCancelled:
		return AlreadyCancelled, nil
	}
	return 0, nil
}

// DefaultCancelPoll is how often a consumer of a table with a CancelledAt column reads the
// cancels of the rows it holds (Config.CancelPoll).
const DefaultCancelPoll = time.Second
