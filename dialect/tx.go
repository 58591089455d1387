package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// begin pins a connection of db and begins d's transaction on it; the transaction gives the
// connection back to the pool when it ends.
func begin(ctx context.Context, d Dialect, db *sql.DB) (Tx, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return beginOn(ctx, d, conn, true)
}

// BeginWrite opens a transaction on db that is to write, at the database's default level
// whatever d declares: on a database with one writer (Caps.OneWriter) it takes the write lock as
// it begins (BEGIN IMMEDIATE), so that the busy timeout waits for another process's writer
// there rather than the first write failing; elsewhere it is db.BeginTx with no options.
// Publishing (inbox.Enqueue) writes its rows in one.
func BeginWrite(ctx context.Context, d Dialect, db *sql.DB) (Tx, error) {
	if d.Caps().OneWriter {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		return beginByStatement(ctx, conn, sqliteBegin(LevelImmediate), true)
	}
	return db.BeginTx(ctx, nil)
}

// beginByStatement opens a transaction on conn with begin, a BEGIN statement (SQLite's), and
// closes conn when it fails and owned says the connection is the transaction's.
func beginByStatement(ctx context.Context, conn *sql.Conn, begin string, owned bool) (Tx, error) {
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		// SQLite answers BEGIN in process: a BEGIN that failed opened nothing.
		if owned {
			conn.Close()
		}
		return nil, err
	}
	return &sqliteTx{pin: pin{conn: conn, owned: owned}}, nil
}

// BeginOn opens a transaction at d's level on conn, a connection the caller pinned and keeps
// (the advisory form's, whose session holds its locks). When the transaction ends well, conn
// stays the caller's. When it cannot begin, or its Commit or Rollback fails (see Tx), conn is
// discarded, which ends its session and everything the session held: the caller must not use
// it again, only close it.
//
// database/sql rolls a transaction back when the context it began with ends: a transaction
// that outlives the call that opens it needs a context of its own.
//
// On MySQL and MariaDB a transaction at the level the connection's session already runs at
// begins with START TRANSACTION alone, saving the round trip of the SET TRANSACTION ISOLATION
// LEVEL that go-sql-driver/mysql sends for a level in sql.TxOptions. The session's level is
// read on the connection's first transaction (Caps.SessionLevelQueries), and again, before a
// transaction would skip the SET, when a statement ran by its text in a transaction on it
// since (ExecContext, QueryContext, QueryRowContext: a handler's, which may have changed it).
// Code that changes the session level of the pool's connections outside the library's
// transactions (SET SESSION TRANSACTION through the *sql.DB) must have a pool of its own.
func BeginOn(ctx context.Context, d Dialect, conn *sql.Conn) (Tx, error) {
	return beginOn(ctx, d, conn, false)
}

func beginOn(ctx context.Context, d Dialect, conn *sql.Conn, owned bool) (Tx, error) {
	c := d.Caps()
	if c.BeginsByStatement {
		return beginByStatement(ctx, conn, sqliteBegin(d.Level()), owned)
	}
	var opts *sql.TxOptions
	s, atLevel := atSessionLevel(ctx, c, conn, sessionLevel(d))
	if !atLevel {
		opts = TxOptions(d)
	}
	tx, err := conn.BeginTx(ctx, opts)
	if err != nil {
		// Whether the server began a transaction before the error is not known.
		Discard(conn)
		return nil, err
	}
	return &serverTx{pin: pin{conn: conn, owned: owned}, tx: tx, session: s}, nil
}

// Discard closes conn and the session behind it instead of returning it to the pool, which
// ends whatever the session had open (a transaction, its locks, session locks). Closing conn
// after it does nothing.
func Discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// pin is a transaction's connection and how it lets go of it.
type pin struct {
	conn  *sql.Conn
	owned bool // the transaction pinned conn itself, and returns it to the pool when it ends
	ended bool // Commit or Rollback ran
}

// end marks the transaction ended and lets go of its connection: discarded when the end
// failed or its outcome is unknown (clean false), returned to the pool when the transaction
// owns it.
func (p *pin) end(clean bool) {
	p.ended = true
	switch {
	case !clean:
		Discard(p.conn)
	case p.owned:
		p.conn.Close()
	}
}

// serverTx is a transaction on Postgres, MySQL or MariaDB: an *sql.Tx begun on a pinned
// connection, so that a failed end can discard the connection. (Begun on the pool, an *sql.Tx
// whose ROLLBACK fails goes back to the pool unless the driver reports driver.ErrBadConn or an
// invalid connection, and its session may still have the transaction open.)
type serverTx struct {
	pin
	tx *sql.Tx
	// session is the connection's, on MySQL and MariaDB: a statement by its text (a
	// handler's, in transactional mode) may change the session's level, so it has the level
	// asked again before a transaction skips setting it. The forms' prepared statements
	// (StmtContext) do not change it.
	session *session
}

// texted notes a statement by text on the transaction's connection.
func (t *serverTx) texted() {
	if t.session != nil {
		t.session.unsure.Store(true)
	}
}

func (t *serverTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.texted()
	return t.tx.ExecContext(ctx, query, args...)
}

func (t *serverTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.texted()
	return t.tx.QueryContext(ctx, query, args...)
}

func (t *serverTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.texted()
	return t.tx.QueryRowContext(ctx, query, args...)
}

func (t *serverTx) StmtContext(ctx context.Context, s *sql.Stmt) *sql.Stmt {
	return t.tx.StmtContext(ctx, s)
}

// Commit commits; a failed COMMIT discards the connection and says whether the transaction
// may have committed (inbox.ErrCommitUnknown) or was rolled back.
func (t *serverTx) Commit() error {
	if t.ended {
		return sql.ErrTxDone
	}
	err := t.tx.Commit()
	t.end(err == nil)
	return commitError(err)
}

// Rollback rolls back; a connection whose ROLLBACK fails is discarded, which rolls the
// transaction back with the session.
func (t *serverTx) Rollback() error {
	if t.ended {
		return sql.ErrTxDone
	}
	err := t.tx.Rollback()
	t.end(err == nil)
	switch {
	case errors.Is(err, sql.ErrTxDone):
		// database/sql rolled back when the transaction's context ended, and kept the
		// connection whether or not that ROLLBACK succeeded.
		return errors.New("the transaction had been rolled back already, when the context it began with ended; its connection was closed, in case that rollback failed")
	case err != nil:
		return fmt.Errorf("%w (the connection was closed, which rolls the transaction back)", err)
	}
	return nil
}

// commitError describes a failed COMMIT, its connection discarded: wrapping
// inbox.ErrCommitUnknown unless the transaction is known to have rolled back.
func commitError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrTxDone):
		return fmt.Errorf("the transaction was rolled back before the COMMIT, when its context ended: %w", err)
	case rolledBack(err):
		return fmt.Errorf("COMMIT failed and the transaction was rolled back: %w", err)
	}
	return sentinel.Errorf(sentinel.CommitUnknown, "", "the connection failed after the COMMIT was sent, so it may have committed or not (%w); the connection was closed", err)
}

// rolledBack reports whether a COMMIT that failed with err is known not to have committed:
// it was never sent (driver.ErrBadConn, which a driver returns only when nothing reached the
// server; a context that had ended), or the server answered it with an error other than its
// session ending (a deadlock or a serialization failure: an SQLSTATE outside the classes 08
// connection exception, 57 operator intervention and 70 interruption, or a MySQL error number
// other than a killed session's). Anything else, a connection that broke while the COMMIT was
// under way above all, leaves the outcome unknown.
func rolledBack(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		return !sessionEnded(coded.SQLState())
	}
	number, state, ok := mysqlError(err.Error())
	if !ok {
		return false
	}
	switch number {
	case 1927, 3169, 4031: // the connection was killed; the session was killed; idle too long
		return false
	}
	return !sessionEnded(state)
}

// sessionEnded reports whether an SQLSTATE says the session ended rather than the statement
// failed.
func sessionEnded(state string) bool {
	return strings.HasPrefix(state, "08") || strings.HasPrefix(state, "57") || strings.HasPrefix(state, "70")
}

// mysqlError reads the error number and SQLSTATE of a server error as go-sql-driver/mysql
// prints it: "Error 1213 (40001): Deadlock found …" (the SQLSTATE may be missing).
func mysqlError(msg string) (number int, state string, ok bool) {
	rest, found := strings.CutPrefix(msg, "Error ")
	if !found {
		return 0, "", false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, "", false
	}
	number, _ = strconv.Atoi(rest[:end])
	rest = rest[end:]
	if len(rest) >= 8 && rest[:2] == " (" && rest[7] == ')' {
		state = rest[2:7]
	}
	return number, state, true
}
