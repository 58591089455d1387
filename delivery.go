package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
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
	// Group is the row's queue name; empty where the table has no group column.
	Group string
	// Headers are the row's headers; nil where the table has no headers column or the row holds
	// none.
	Headers map[string]string
	// Tx is the delivery's transaction in transactional mode, nil otherwise. Writes made through
	// it commit with an Ack and are rolled back by every other outcome. It must not be used
	// after the handler returns.
	Tx Tx

	// Hold is the claiming form's handle on the row (a transaction, a lease token, a locked
	// connection). It belongs to the form; handlers leave it alone.
	Hold any

	lent      *lentTx
	decodeErr error // why the row's data does not decode, when it does not
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

// LendTx is for forms: it sets d.Tx to a guarded view of tx for the handler. TakeBackTx ends
// the loan before the form settles.
func (d *Delivery) LendTx(tx Tx) {
	d.lent = &lentTx{tx: tx}
	d.Tx = d.lent
}

// TakeBackTx is for forms: it ends the handler's use of d.Tx, so that later calls through it
// fail. It reports ErrTransactionHeld when a statement of the handler's is still running on it
// (from a goroutine the handler left behind); the form must then roll the transaction back and
// settle nothing.
func (d *Delivery) TakeBackTx() error {
	if d.lent == nil {
		return nil
	}
	d.lent.mu.Lock()
	defer d.lent.mu.Unlock()
	d.lent.returned = true
	if d.lent.running > 0 {
		return fmt.Errorf("%w: delivery %d: %d statement(s) of the handler still running on its transaction: finish with the transaction before the handler returns", ErrTransactionHeld, d.ID, d.lent.running)
	}
	return nil
}

// lentTx is the handler's view of a delivery's transaction: it counts the statements running
// on it and refuses new ones once the form has taken it back.
type lentTx struct {
	tx       Tx
	mu       sync.Mutex
	running  int
	returned bool
}

func (l *lentTx) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.returned {
		return fmt.Errorf("%w: the delivery's transaction was used after its handler returned", ErrTransactionHeld)
	}
	l.running++
	return nil
}

func (l *lentTx) leave() {
	l.mu.Lock()
	l.running--
	l.mu.Unlock()
}

func (l *lentTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.leave()
	return l.tx.ExecContext(ctx, query, args...)
}

func (l *lentTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.leave()
	return l.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext after the loan ended runs nothing: its Row reports a canceled context whose
// cause is ErrTransactionHeld (*sql.Row cannot carry an error of ours).
func (l *lentTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := l.enter(); err != nil {
		dead, cancel := context.WithCancelCause(ctx)
		cancel(err)
		return l.tx.QueryRowContext(dead, query, args...)
	}
	defer l.leave()
	return l.tx.QueryRowContext(ctx, query, args...)
}
