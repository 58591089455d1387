// Package dialect describes the four databases the library runs on and the isolation level (or
// SQLite mode) that each opens the transactions of a delivery's work at.
//
// A dialect value carries its level in its type, and each dialect's type parameter is
// constrained to the levels its database opens:
//
//	dialect.Postgres[isolation.ReadCommitted]{}   // compiles
//	dialect.Postgres[isolation.ReadUncommitted]{} // does not: Postgres runs it as read committed
//	dialect.SQLite[isolation.Immediate]{}         // compiles
//	dialect.SQLite[isolation.Serializable]{}      // does not: SQLite declares modes, not levels
//
// The forms state what they need from a dialect as a method set (RowLocks for the row lock form,
// SessionLocks for the advisory form), so a form on a database that lacks the capability does
// not compile either. When the database is only known at run time, Detect and Parse return a
// Runtime dialect that checks the same pairs when the consumer starts.
package dialect

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Dialect is what the library needs from a database. The types of this package implement it;
// other implementations are not supported.
type Dialect interface {
	// Name is "postgres", "mysql", "mariadb" or "sqlite".
	Name() string
	// Level is the declared level or mode, as the dialect's isolation marker names it.
	Level() Level
	// Quote returns ident quoted for the database, inner quotes doubled. It refuses an empty
	// name, a name with a NUL byte, and a name longer than the database keeps.
	Quote(ident string) (string, error)
	// Placeholder returns the n-th statement parameter (from 1): "$n" on Postgres, "?" elsewhere.
	Placeholder(n int) string
	// Time returns t as the library binds a timestamp: UTC, to the microsecond. On SQLite it is
	// text "YYYY-MM-DD HH:MM:SS.ffffff", fixed width so that text order is time order.
	Time(t time.Time) any
	// Begin pins a pooled connection of db and opens a transaction on it at the dialect's
	// level (see BeginOn). The connection goes back to the pool when the transaction ends, or is
	// discarded when its end fails or its outcome is unknown.
	Begin(ctx context.Context, db *sql.DB) (Tx, error)
	// CheckServer fails with an error wrapping inbox.ErrServerTooOld when the server is older
	// than the library supports, and with inbox.ErrDialect when it is another database.
	CheckServer(ctx context.Context, db *sql.DB) error
	// Allows reports whether the form runs on this dialect. The compile-time dialects have
	// checked it already and return nil; a Runtime dialect returns an error wrapping
	// inbox.ErrDialect for a pair its database cannot run.
	Allows(form Form) error
	// Retryable reports whether err is a transient conflict worth running the statement again:
	// a serialization failure (Postgres 40001), a deadlock (MySQL 1213) or a lock wait timeout
	// (MySQL 1205), or SQLITE_BUSY.
	Retryable(err error) bool
	// Caps returns the database's capability record: one value per database, shared by its
	// levels, not to be modified.
	Caps() *Caps
	// TxEnded reports whether the database has ended tx, a transaction this dialect began, so
	// that a statement run through tx now would run outside any transaction (in autocommit,
	// on MySQL and MariaDB). err is the error a statement in tx just failed with, or nil after
	// rows were read from tx, whose errors reach only their reader. MySQL is judged by the
	// error (a deadlock, a lock wait timeout where innodb_rollback_on_timeout is on, a lost
	// connection); MariaDB (SELECT @@in_transaction) and SQLite are asked, on tx, and a
	// question that fails counts as ended. Postgres reports false: it refuses every statement
	// of a failed transaction by itself.
	TxEnded(ctx context.Context, tx Tx, err error) bool
}

// Tx is a transaction opened by a dialect on a pinned connection (Begin, BeginOn): through
// database/sql on Postgres, MySQL and MariaDB, and with BEGIN statements on SQLite (whose modes
// database/sql cannot express).
//
// Commit and Rollback never leave a transaction open on a connection: a connection whose
// COMMIT or ROLLBACK fails, or whose outcome is unknown, is discarded, which ends its session
// and rolls back whatever it had open. A Commit that fails wraps inbox.ErrCommitUnknown when
// the COMMIT may have committed (the connection broke after it was sent); otherwise its error
// says the transaction was rolled back. Once the transaction has ended, Commit and Rollback
// fail with sql.ErrTxDone and touch nothing.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	// StmtContext returns s, a statement prepared on the pool, bound to the transaction, as
	// (*sql.Tx).StmtContext does. On SQLite, whose transaction database/sql does not see, a
	// prepared statement cannot run in it: StmtContext returns nil there, and the caller runs
	// the statement's text with ExecContext or QueryContext.
	StmtContext(ctx context.Context, s *sql.Stmt) *sql.Stmt
	Commit() error
	Rollback() error
}

// Form is one of the library's forms, as a dialect is asked about it (Allows, CheckGalera).
type Form uint8

// The forms: packages rowlock, lease and advisory.
const (
	RowLockForm Form = iota + 1
	LeaseForm
	AdvisoryForm
)

// String names the form as its package does: "rowlock", "lease", "advisory".
func (f Form) String() string {
	switch f {
	case RowLockForm:
		return "rowlock"
	case LeaseForm:
		return "lease"
	case AdvisoryForm:
		return "advisory"
	}
	return "form(" + strconv.Itoa(int(f)) + ")"
}

// SkipLocked is the capability of the row lock form: SELECT … FOR UPDATE SKIP LOCKED.
type SkipLocked struct{}

// AdvisoryLocks is the capability of the advisory form: session locks on a name
// (pg_try_advisory_lock, GET_LOCK).
type AdvisoryLocks struct{}

// NoRowLocksOnSQLiteUseLease is what SQLite offers where the row lock form wants SkipLocked:
// SQLite has no row locks, so take the lease form (package lease) there. It exists so that the
// compiler's message for rowlock.New on SQLite says so.
type NoRowLocksOnSQLiteUseLease struct{}

// NoSessionLocksOnSQLiteUseLease is what SQLite offers where the advisory form wants
// AdvisoryLocks: SQLite has no session locks, so take the lease form there.
type NoSessionLocksOnSQLiteUseLease struct{}

func dialectError(format string, args ...any) error {
	return sentinel.Errorf(sentinel.Dialect, "", format, args...)
}
