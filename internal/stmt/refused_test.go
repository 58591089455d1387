package stmt_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/isolation"
)

// failingDB is a database/sql connector whose connections fail every statement with err (a
// prepare, or the EXPLAIN of a statement checked unprepared) and answer every ping: a server
// that a fresh connection reaches, as it does once a cut connection is replaced.
type failingDB struct{ err error }

func (f failingDB) Connect(context.Context) (driver.Conn, error) { return failingConn(f), nil }
func (f failingDB) Driver() driver.Driver                        { return f }
func (f failingDB) Open(string) (driver.Conn, error)             { return failingConn(f), nil }

type failingConn failingDB

func (c failingConn) Prepare(string) (driver.Stmt, error) { return nil, c.err }
func (c failingConn) Close() error                        { return nil }
func (c failingConn) Begin() (driver.Tx, error)           { return nil, c.err }
func (c failingConn) Ping(context.Context) error          { return nil }
func (c failingConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return nil, c.err
}

// coded is a driver error carrying a SQLSTATE, as pgx's and lib/pq's do.
type coded struct{ state, msg string }

func (e coded) Error() string    { return e.msg }
func (e coded) SQLState() string { return e.state }

// TestStatementCutIsNotSchema: a statement Open checks that fails because its connection was
// cut (killed, reset, closed under it, the server going away) is the connection's failure,
// whoever's driver reports it and however: never inbox.ErrSchema, which ends Run, even when a
// fresh connection then answers a ping, as it does under a connection killed while Open runs.
// The server refusing the statement (a missing table or column) still is ErrSchema.
func TestStatementCutIsNotSchema(t *testing.T) {
	cut := []error{
		driver.ErrBadConn,
		sql.ErrConnDone,
		errors.New("invalid connection"), // go-sql-driver/mysql's ErrInvalidConn
		io.EOF,
		fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), // pgx
		&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET},
		fmt.Errorf("write failed: %w", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}),
		coded{"57P01", "FATAL: terminating connection due to administrator command (SQLSTATE 57P01)"},
		coded{"57P02", "FATAL: terminating connection because of crash of another server process (SQLSTATE 57P02)"},
		coded{"57P03", "FATAL: the database system is shutting down (SQLSTATE 57P03)"},
		coded{"08006", "connection failure (SQLSTATE 08006)"},
		errors.New("Error 2006 (HY000): MySQL server has gone away"),
		errors.New("Error 2013 (HY000): Lost connection to MySQL server during query"),
		errors.New("Error 1927 (70100): Connection was killed"),
		errors.New("Error 1053 (08S01): Server shutdown in progress"),
	}
	refused := []error{
		coded{"42P01", `ERROR: relation "jobs" does not exist (SQLSTATE 42P01)`},
		coded{"42703", `ERROR: column "attempt" does not exist (SQLSTATE 42703)`},
		errors.New("Error 1146 (42S02): Table 'test.jobs' doesn't exist"),
		errors.New("Error 1054 (42S22): Unknown column 'attempt' in 'field list'"),
	}
	for _, d := range []dialect.Dialect{dialect.Postgres[isolation.Default]{}, dialect.MariaDB[isolation.Default]{}} {
		for _, unprepared := range []bool{false, true} {
			check := func(err error) error {
				st, serr := stmt.New(d, inbox.Table{Name: "jobs", ID: "id"})
				if serr != nil {
					t.Fatal(serr)
				}
				st.Unprepared = unprepared
				db := sql.OpenDB(failingDB{err})
				defer db.Close()
				_, got := st.Statement(context.Background(), db, "claim", sqltext.Statement{SQL: "SELECT " + d.Placeholder(1)})
				return got
			}
			for _, err := range cut {
				got := check(err)
				if got == nil || errors.Is(got, inbox.ErrSchema) || !strings.Contains(got.Error(), "connection") {
					t.Errorf("%s, unprepared %v: a statement cut by %q: %v, want the connection's failure, not ErrSchema", d.Name(), unprepared, err, got)
				}
			}
			for _, err := range refused {
				if got := check(err); !errors.Is(got, inbox.ErrSchema) {
					t.Errorf("%s, unprepared %v: a statement refused with %q: %v, want ErrSchema", d.Name(), unprepared, err, got)
				}
			}
		}
	}
}

// TestStatementLostNamesTheRemedy: a prepared statement of the connection's own that the server
// lost (26000) or already held (42P05), which a pooler in transaction mode causes, fails the
// check with ErrDialect, not ErrSchema, naming the pooler, the library's setting and pgx's DSN
// option, each once; with the setting on, it says the driver prepared the statement itself.
func TestStatementLostNamesTheRemedy(t *testing.T) {
	for _, lost := range []error{
		coded{"42P05", `ERROR: prepared statement "stmtcache_1f" already exists (SQLSTATE 42P05)`},
		fmt.Errorf("reading: %w", coded{"26000", `ERROR: prepared statement "stmt_2e" does not exist (SQLSTATE 26000)`}),
	} {
		for _, unprepared := range []bool{false, true} {
			st, err := stmt.New(dialect.Postgres[isolation.Default]{}, inbox.Table{Name: "jobs", ID: "id"})
			if err != nil {
				t.Fatal(err)
			}
			st.Unprepared = unprepared
			db := sql.OpenDB(failingDB{lost})
			_, got := st.Statement(context.Background(), db, "claim", sqltext.Statement{SQL: "SELECT $1"})
			db.Close()
			if !errors.Is(got, inbox.ErrDialect) || errors.Is(got, inbox.ErrSchema) || !errors.Is(got, lost) {
				t.Errorf("unprepared %v, %q: %v, want ErrDialect wrapping the driver's error, not ErrSchema", unprepared, lost, got)
				continue
			}
			msg := got.Error()
			for _, want := range []string{`table "jobs"`, "claim statement", "pooler in transaction mode", "PgBouncer", "inbox.Config.UnpreparedStatements", "default_query_exec_mode=exec", "session pooling", "inbox:"} {
				if n := strings.Count(msg, want); n != 1 {
					t.Errorf("unprepared %v: %q says %q %d times, want once", unprepared, msg, want, n)
				}
			}
			if set := strings.Contains(msg, "is set, so the driver prepared the statement itself"); set != unprepared {
				t.Errorf("unprepared %v: %q, want it to say the setting is on only when it is", unprepared, msg)
			}
		}
	}
}
