package lease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
)

// idleConnector's connections answer nothing; the test runs no statement.
type idleConnector struct{}

func (idleConnector) Connect(context.Context) (driver.Conn, error) { return idleConn{}, nil }
func (idleConnector) Driver() driver.Driver                        { return nil }

type idleConn struct{}

func (idleConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no statements") }
func (idleConn) Close() error                        { return nil }
func (idleConn) Begin() (driver.Tx, error)           { return nil, errors.New("no transactions") }

// TestOwnConnCloseAfterDiscard: a transaction on the form's own connection whose end failed
// discards the connection (dialect.Discard, as a claim's COMMIT that failed certification on a
// Galera node does); closing the form afterwards reports no error for it. It reported "sql:
// connection is already closed", logged as "closing the form" when a consumer stopped.
func TestOwnConnCloseAfterDiscard(t *testing.T) {
	db := sql.OpenDB(idleConnector{})
	defer db.Close()
	db.SetMaxOpenConns(4)
	o, err := keepOwn(context.Background(), db, false)
	if err != nil || o == nil {
		t.Fatalf("keepOwn: %v, %v", o, err)
	}
	dialect.Discard(o.conn)
	if err := o.close(); err != nil {
		t.Errorf("close after the connection was discarded: %v, want nil", err)
	}
}
