package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Delivery is one claimed row, handed to a handler. It is valid until the handler returns.
type Delivery struct {
	// ID is the row's id.
	ID int64
	// Payload is the row's payload; nil where the table has no payload column or the row holds
	// NULL (and on SQLite, whose driver returns no bytes for it, where it holds an empty value).
	Payload []byte
	// Attempt counts the row's deliveries, this one included: the first delivery reads 1. It is
	// 0 where the table has no attempt column.
	Attempt int
	// Queue is the row's queue, read from the queue column (Table.Queue); empty where the table
	// has none.
	Queue string
	// Kind is the row's kind, read from the kind column (Table.Kind); empty where the table has
	// none.
	Kind string
	// Headers are the row's headers; nil where the table has no headers column or the row holds
	// none.
	Headers map[string]string
	// Tx is the delivery's transaction in transactional mode, nil otherwise. Writes made through
	// it commit with an Ack and are rolled back by every other outcome. It must not be used
	// after the handler returns.
	//
	// Once the database has ended the transaction under the handler (MySQL and MariaDB roll all
	// of it back on a deadlock, and would run the statements after it in autocommit), Tx refuses
	// every statement with an error wrapping ErrTransactionEnded, and the row is not settled,
	// whatever the handler returns: it is delivered again. On MySQL the guard judges by the
	// failed statement's error, so an error met only while reading rows (Rows.Next, Rows.Err,
	// Row.Scan) escapes it: a handler must not return Ack after one. MariaDB and SQLite are
	// asked after rows were read; Postgres refuses the statements of a failed transaction by
	// itself.
	Tx Tx

	hold      any // the claiming form's handle on the row (SetHold, HoldOf)
	lent      *loan
	decodeErr error     // why the row's data does not decode, when it does not
	claimed   time.Time // when its claim returned, where the consumer has an Observer

	// The application's own columns the claim read (Table.Columns): the table's name, the
	// columns' names as described and their values in that order.
	ownTable  string
	ownNames  []string
	ownValues []any
}

// Column returns the value of the application's own column name (one of Table.Columns), read
// with d's row by its claim, converted to T as Rows.Scan converts a column into a *T: text reads
// as a string or []byte on every driver (MySQL's returns text as bytes), a number as int64 or a
// string, text holding a number as int64, and T may be an sql.Scanner. A NULL reads as T's
// zero value; ask for a pointer (*string) or an sql.Null[string] to tell it apart. It fails
// naming the table and the column where name is not one of Table.Columns or the value does not
// convert to T.
func Column[T any](d *Delivery, name string) (T, error) {
	var v sql.Null[T]
	for i, n := range d.ownNames {
		if n != name {
			continue
		}
		if err := v.Scan(d.ownValues[i]); err != nil {
			return v.V, sentinel.Errorf(nil, "", "table %q, row %d, column %q: %w", d.ownTable, d.ID, name, err)
		}
		return v.V, nil
	}
	if d.ownNames == nil {
		return v.V, sentinel.Errorf(nil, "", "row %d: column %q is not read with the row, since the table's description names no Columns: name it in inbox.Table.Columns", d.ID, name)
	}
	return v.V, sentinel.Errorf(nil, sentinel.Row(d.ownTable, d.ID), "column %q is not read with the row (Table.Columns names %s): add it to inbox.Table.Columns", name, strings.Join(d.ownNames, ", "))
}

// Undecodable is for forms and handler adapters: it records that the row's data (its payload
// or headers) does not decode. The consumer then settles the delivery by
// Config.UndecodablePayload and logs err; a handler is not called, or its outcome is ignored.
func (d *Delivery) Undecodable(err error) { d.decodeErr = err }

// Tx is the transaction a handler writes through in transactional mode: an *sql.Tx on
// Postgres, MySQL and MariaDB, and a pinned connection inside BEGIN on SQLite.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// loan is one transaction lent to the handlers of one claim's deliveries: the view of it each
// Delivery.Tx is. It counts the statements running on it, refuses new ones once the form has
// taken it back, and refuses every one once the database has ended the transaction.
type loan struct {
	tx    dialect.Tx
	dl    dialect.Dialect
	table string
	ds    []*Delivery

	mu       sync.Mutex
	running  int
	returned bool
	verdict  error // TakeBackTx's answer, once taken back
	// unsure says rows were read since the database was last heard from: a statement may have
	// failed while they were read, and only their reader saw it.
	unsure bool
	ended  error // why the transaction is over, once the database has ended it
}

// rows names the loan's rows: "row 7", "rows 7, 8".
func (l *loan) rows() string {
	if len(l.ds) == 1 {
		return fmt.Sprintf("row %d", l.ds[0].ID)
	}
	ids := make([]string, len(l.ds))
	for i, d := range l.ds {
		ids[i] = strconv.FormatInt(d.ID, 10)
	}
	return "rows " + strings.Join(ids, ", ")
}

func (l *loan) takeBack() error {
	l.mu.Lock()
	if l.returned {
		defer l.mu.Unlock()
		return l.verdict
	}
	l.returned = true
	ask := l.unsure && l.running == 0 && l.ended == nil
	l.unsure = false
	l.mu.Unlock()
	if ask {
		// No statement can start now, and none runs: the question has the connection alone.
		l.judge(context.Background(), nil)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.running > 0:
		l.verdict = sentinel.Errorf(ErrTransactionHeld, "", "table %q, %s: %d statement(s) of the handler still running on its transaction: finish with the transaction before the handler returns", l.table, l.rows(), l.running)
	case l.ended != nil:
		l.verdict = l.ended
	}
	return l.verdict
}

// enter admits a statement, or says why it may not run. A statement after rows were read first
// asks whether the database ended the transaction meanwhile.
func (l *loan) enter(ctx context.Context) error {
	l.mu.Lock()
	switch {
	case l.returned:
		l.mu.Unlock()
		return sentinel.Errorf(ErrTransactionHeld, "", "table %q, %s: the delivery's transaction was used after its handler returned", l.table, l.rows())
	case l.ended != nil:
		l.mu.Unlock()
		return l.ended
	}
	l.running++
	ask := l.unsure
	l.unsure = false
	l.mu.Unlock()
	if !ask {
		return nil
	}
	l.judge(ctx, nil)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		l.running--
		return l.ended
	}
	return nil
}

// leave ends a statement admitted by enter that failed with err, or succeeded; queried says it
// returned rows, whose reading may fail unseen.
func (l *loan) leave(ctx context.Context, err error, queried bool) {
	if err != nil {
		l.judge(ctx, err)
	}
	l.mu.Lock()
	l.running--
	if queried && err == nil {
		l.unsure = true
	}
	l.mu.Unlock()
}

// judge asks the dialect whether the database ended the transaction after cause (nil: after
// rows were read) and records it if so. The statement asking counts as running meanwhile.
func (l *loan) judge(ctx context.Context, cause error) {
	if !l.dl.TxEnded(ctx, l.tx, cause) {
		return
	}
	const after = "rolling back its writes: nothing more runs in it and nothing is settled, so the handler runs again"
	ended := fmt.Errorf("%w: table %q, %s: the database ended the handler's transaction when a statement in it failed while its rows were read, "+after, ErrTransactionEnded, l.table, l.rows())
	if cause != nil {
		ended = fmt.Errorf("%w: table %q, %s: the database ended the handler's transaction when a statement in it failed (%w), "+after, ErrTransactionEnded, l.table, l.rows(), cause)
	}
	l.mu.Lock()
	if l.ended == nil {
		l.ended = ended
	}
	l.mu.Unlock()
}

func (l *loan) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := l.enter(ctx); err != nil {
		return nil, err
	}
	res, err := l.tx.ExecContext(ctx, query, args...)
	l.leave(ctx, err, false)
	return res, err
}

func (l *loan) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := l.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := l.tx.QueryContext(ctx, query, args...)
	l.leave(ctx, err, true)
	return rows, err
}

// QueryRowContext after the loan ended, or after the database ended the transaction, runs
// nothing: its Row reports a canceled context whose cause says why (*sql.Row cannot carry an
// error of ours).
func (l *loan) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := l.enter(ctx); err != nil {
		dead, cancel := context.WithCancelCause(ctx)
		cancel(err)
		return l.tx.QueryRowContext(dead, query, args...)
	}
	row := l.tx.QueryRowContext(ctx, query, args...)
	l.leave(ctx, row.Err(), true)
	return row
}
