package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
)

// sqliteTx is a transaction on a pinned connection, begun with a statement database/sql cannot
// express. It is used by one goroutine at a time, like *sql.Tx.
type sqliteTx struct {
	*sql.Conn
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
	return sqliteTx{conn}, nil
}

// Commit commits and returns the connection to the pool. A failed COMMIT (SQLITE_BUSY, say)
// leaves the transaction open in SQLite, so it is rolled back before the connection goes back.
func (tx sqliteTx) Commit() error {
	if _, err := tx.ExecContext(context.Background(), "COMMIT"); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Close()
}

// Rollback rolls back and returns the connection to the pool; a connection whose ROLLBACK fails
// is discarded, so no transaction is ever left open on a pooled connection.
func (tx sqliteTx) Rollback() error {
	if _, err := tx.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		tx.Raw(func(any) error { return driver.ErrBadConn })
		tx.Close()
		return err
	}
	return tx.Close()
}
