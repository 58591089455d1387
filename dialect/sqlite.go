package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
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
	conn *sql.Conn

	mu    sync.Mutex
	ended error // why SQLite ended the transaction, once it has
}

func beginSQLite(ctx context.Context, db *sql.DB, begin string) (Tx, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		conn.Close()
		return nil, err
	}
	return &sqliteTx{conn: conn}, nil
}

func (tx *sqliteTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := tx.endedErr(); err != nil {
		return nil, err
	}
	res, err := tx.conn.ExecContext(ctx, query, args...)
	if err != nil {
		tx.probe(err)
	}
	return res, err
}

func (tx *sqliteTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := tx.endedErr(); err != nil {
		return nil, err
	}
	rows, err := tx.conn.QueryContext(ctx, query, args...)
	if err != nil {
		tx.probe(err)
	}
	return rows, err
}

// QueryRowContext after SQLite ended the transaction runs nothing: its Row reports a cancelled
// context whose cause says why (*sql.Row cannot carry another error).
func (tx *sqliteTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := tx.endedErr(); err != nil {
		dead, cancel := context.WithCancelCause(ctx)
		cancel(err)
		return tx.conn.QueryRowContext(dead, query, args...)
	}
	return tx.conn.QueryRowContext(ctx, query, args...)
}

func (tx *sqliteTx) endedErr() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.ended
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
	tx.ended = fmt.Errorf("inbox: SQLite rolled the transaction back when a statement failed (%v); nothing more runs in it, and it cannot commit", cause)
}

// Commit commits and returns the connection to the pool. A failed COMMIT (SQLITE_BUSY, say)
// leaves the transaction open in SQLite, so it is rolled back before the connection goes back.
func (tx *sqliteTx) Commit() error {
	if err := tx.endedErr(); err != nil {
		return errors.Join(err, tx.conn.Close())
	}
	if _, err := tx.conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.conn.Close()
}

// Rollback rolls back and returns the connection to the pool; a connection whose ROLLBACK fails
// is discarded, so no transaction is ever left open on a pooled connection.
func (tx *sqliteTx) Rollback() error {
	if tx.endedErr() != nil {
		return tx.conn.Close() // SQLite rolled back already, and probe checked it
	}
	if _, err := tx.conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		tx.conn.Raw(func(any) error { return driver.ErrBadConn })
		tx.conn.Close()
		return err
	}
	return tx.conn.Close()
}
