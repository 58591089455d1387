package dialect_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// coded is a driver error carrying a SQLSTATE, as pgx's and lib/pq's do.
type coded struct{ state, msg string }

func (e coded) Error() string    { return e.msg }
func (e coded) SQLState() string { return e.state }

// TestConnectionFailed: the errors of a connection that failed under a statement, as each
// driver reports them (wrapped or not), are told from the server refusing the statement, and
// from a context that ended.
func TestConnectionFailed(t *testing.T) {
	for _, err := range []error{
		driver.ErrBadConn,
		fmt.Errorf("preparing: %w", driver.ErrBadConn),
		sql.ErrConnDone,
		errors.New("invalid connection"), // go-sql-driver/mysql's ErrInvalidConn
		io.EOF,
		fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), // pgx
		&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET},
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		coded{"57P01", "FATAL: terminating connection due to administrator command (SQLSTATE 57P01)"},
		coded{"57P02", "FATAL: terminating connection because of crash of another server process (SQLSTATE 57P02)"},
		coded{"57P03", "FATAL: the database system is starting up (SQLSTATE 57P03)"},
		coded{"57P05", "FATAL: terminating connection due to idle-session timeout (SQLSTATE 57P05)"},
		coded{"08006", "connection failure (SQLSTATE 08006)"},
		coded{"08P01", "protocol violation (SQLSTATE 08P01)"},
		errors.New("Error 1053 (08S01): Server shutdown in progress"),
		errors.New("Error 1927 (70100): Connection was killed"),
		errors.New("Error 2006 (HY000): MySQL server has gone away"),
		errors.New("Error 2013 (HY000): Lost connection to MySQL server during query"),
		errors.New("Error 4031 (HY000): The client was disconnected by the server because of inactivity"),
	} {
		if !dialect.ConnectionFailed(err) {
			t.Errorf("ConnectionFailed(%q) = false, want true", err)
		}
	}
	for _, err := range []error{
		nil,
		context.Canceled,
		fmt.Errorf("query: %w", context.DeadlineExceeded),
		coded{"42P01", `ERROR: relation "jobs" does not exist (SQLSTATE 42P01)`},
		coded{"40001", "ERROR: could not serialize access (SQLSTATE 40001)"},
		coded{"42P05", `ERROR: prepared statement "stmt_1" already exists (SQLSTATE 42P05)`},
		errors.New("Error 1146 (42S02): Table 'test.jobs' doesn't exist"),
		errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"),
		errors.New("no such table: jobs"),
	} {
		if dialect.ConnectionFailed(err) {
			t.Errorf("ConnectionFailed(%q) = true, want false", err)
		}
	}
}

// TestPooled: a prepared statement the server lost or already held comes back naming the
// pooler and the settings once, matching ErrDialect and the driver's error; Pooled twice adds
// nothing, and any other error passes as it is.
func TestPooled(t *testing.T) {
	lost := coded{"42P05", `ERROR: prepared statement "stmtcache_1f" already exists (SQLSTATE 42P05)`}
	got := dialect.Pooled(fmt.Errorf("inbox: reading the Postgres server version: %w", lost), false)
	if !errors.Is(got, sentinel.Dialect) || !errors.Is(got, lost) {
		t.Errorf("Pooled: %v, want it to match ErrDialect and the driver's error", got)
	}
	if again := dialect.Pooled(fmt.Errorf("table %q: %w", "jobs", got), false); again.Error() != fmt.Sprintf("table %q: %v", "jobs", got) {
		t.Errorf("Pooled of an error Pooled made: %q, want it unchanged", again)
	}
	for _, err := range []error{nil, errors.New("Error 1146 (42S02): Table 'test.jobs' doesn't exist"), coded{"57P01", "terminating"}} {
		if got := dialect.Pooled(err, false); got != err {
			t.Errorf("Pooled(%v) = %v, want it as it was", err, got)
		}
	}
	if !dialect.StatementLost(coded{"26000", "does not exist"}) || dialect.StatementLost(errors.New(`prepared statement "x" does not exist`)) {
		t.Error("StatementLost goes by the SQLSTATE a driver's error carries: 26000 and 42P05 on Postgres")
	}
	// Every statement's result passes through Pooled, most of them nil.
	if n := testing.AllocsPerRun(100, func() { dialect.Pooled(nil, false) }); n != 0 {
		t.Errorf("Pooled(nil) allocates %v times, want none", n)
	}
}
