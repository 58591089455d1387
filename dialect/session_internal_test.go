package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"
)

// TestSessionLookupAllocatesNothing: finding what is known of a connection's session, once it
// was read, allocates nothing: it runs before every MySQL and MariaDB transaction.
func TestSessionLookupAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	db := sql.OpenDB(levelConnector("READ-COMMITTED"))
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, at := atSessionLevel(ctx, &mariadbCaps, conn, LevelReadCommitted); !at {
		t.Fatal("the session at READ-COMMITTED is not found at read committed")
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, at := atSessionLevel(ctx, &mariadbCaps, conn, LevelReadCommitted); !at {
			t.Fatal("the session's level was lost")
		}
	})
	if allocs != 0 {
		t.Errorf("atSessionLevel allocates %v times a transaction, want 0", allocs)
	}
}

// levelConnector is a driver whose connections answer every query with one value: the
// session's level.
type levelConnector string

func (c levelConnector) Connect(context.Context) (driver.Conn, error) {
	return &levelConn{string(c)}, nil
}
func (c levelConnector) Driver() driver.Driver            { return c }
func (c levelConnector) Open(string) (driver.Conn, error) { return &levelConn{string(c)}, nil }

type levelConn struct{ level string }

func (c *levelConn) Prepare(string) (driver.Stmt, error) { return nil, driver.ErrSkip }
func (c *levelConn) Close() error                        { return nil }
func (c *levelConn) Begin() (driver.Tx, error)           { return nil, driver.ErrSkip }

func (c *levelConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return ValueRows(c.level), nil
}
