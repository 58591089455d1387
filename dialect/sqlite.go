package dialect

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// sqliteTx is a transaction on a pinned connection, begun with a statement database/sql cannot
// express. Its methods may be called from several goroutines (a handler and the lease form's
// extension), which the connection serialises.
//
// SQLite ends a transaction by itself when some statements fail (an interrupted write, a full
// disk, an I/O error); statements after that would run in autocommit and land outside it. So
// after a failed statement the transaction asks SQLite whether it is still open, and once
// SQLite has ended it every later statement and Commit fail instead.
type sqliteTx struct {
	pin

	mu     sync.Mutex
	reason error // why SQLite ended the transaction, once it has
}

func (tx *sqliteTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return run(tx, func() (sql.Result, error) { return tx.conn.ExecContext(ctx, query, args...) })
}

func (tx *sqliteTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return run(tx, func() (*sql.Rows, error) { return tx.conn.QueryContext(ctx, query, args...) })
}

// run runs a statement of tx: not once SQLite has ended the transaction, and when it fails, the
// probe of whether SQLite ended the transaction with it.
func run[T any](tx *sqliteTx, statement func() (T, error)) (T, error) {
	if err := tx.endedBySQLite(); err != nil {
		var none T
		return none, err
	}
	v, err := statement()
	if err != nil {
		tx.probe(err)
	}
	return v, err
}

// QueryRowContext after SQLite ended the transaction runs nothing: its Row reports a cancelled
// context whose cause says why (*sql.Row cannot carry another error).
func (tx *sqliteTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := tx.endedBySQLite(); err != nil {
		dead, cancel := context.WithCancelCause(ctx)
		cancel(err)
		return tx.conn.QueryRowContext(dead, query, args...)
	}
	return tx.conn.QueryRowContext(ctx, query, args...)
}

// StmtContext returns nil: a statement prepared on the pool cannot run on the pinned
// connection. Run its text instead (the SQLite driver compiles a statement at every run,
// prepared or not).
func (tx *sqliteTx) StmtContext(context.Context, *sql.Stmt) *sql.Stmt { return nil }

func (tx *sqliteTx) endedBySQLite() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.reason
}

// probe asks SQLite whether the transaction outlived the failed statement: BEGIN fails inside a
// transaction and succeeds outside one (and is rolled back at once).
func (tx *sqliteTx) probe(cause error) {
	if _, err := tx.conn.ExecContext(context.Background(), "BEGIN"); err != nil {
		return
	}
	tx.conn.ExecContext(context.Background(), "ROLLBACK")
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.reason = sentinel.Errorf(nil, "", "SQLite rolled the transaction back when a statement failed (%v); nothing more runs in it, and it cannot commit", cause)
}

// Commit commits and lets go of the connection. A failed COMMIT (SQLITE_BUSY, say) leaves the
// transaction open in SQLite, so it is rolled back before the connection goes back; SQLite
// answers in process, so a COMMIT that failed committed nothing.
func (tx *sqliteTx) Commit() error {
	if tx.ended {
		return sql.ErrTxDone
	}
	if err := tx.endedBySQLite(); err != nil {
		tx.end(true)
		return err
	}
	if _, err := tx.conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		rerr := tx.Rollback()
		if rerr != nil {
			return fmt.Errorf("COMMIT failed (%w), and so did the ROLLBACK after it: %w", err, rerr)
		}
		return fmt.Errorf("COMMIT failed and the transaction was rolled back: %w", err)
	}
	tx.end(true)
	return nil
}

// Rollback rolls back and lets go of the connection; a connection whose ROLLBACK fails is
// discarded, so no transaction is ever left open on a pooled connection.
func (tx *sqliteTx) Rollback() error {
	if tx.ended {
		return sql.ErrTxDone
	}
	if tx.endedBySQLite() != nil {
		tx.end(true) // SQLite rolled back already, and probe checked it
		return nil
	}
	_, err := tx.conn.ExecContext(context.Background(), "ROLLBACK")
	tx.end(err == nil)
	if err != nil {
		return fmt.Errorf("%w (the connection was closed, which rolls the transaction back)", err)
	}
	return nil
}
