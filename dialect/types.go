package dialect

import (
	"context"
	"database/sql"
	"time"
)

// Postgres is PostgreSQL 9.5 or later, opening transactions at level L.
type Postgres[L PostgresOpens] struct{ postgres }

// Level names L.
func (Postgres[L]) Level() Level { return levelOf[L]() }

// Begin pins a connection and opens a plain BEGIN on it by default, and the declared level
// through sql.TxOptions.
func (d Postgres[L]) Begin(ctx context.Context, db *sql.DB) (Tx, error) { return begin(ctx, d, db) }

// MySQL is MySQL 8.0.1 or later, opening transactions at level L (READ COMMITTED by default).
// MariaDB 10.6 or later also runs it.
type MySQL[L MySQLOpens] struct{ mysql }

// Level names L.
func (MySQL[L]) Level() Level { return levelOf[L]() }

// Begin pins a connection and opens the transaction on it at READ COMMITTED by default and at
// the declared level otherwise.
func (d MySQL[L]) Begin(ctx context.Context, db *sql.DB) (Tx, error) { return begin(ctx, d, db) }

// MariaDB is MariaDB 10.6 or later, opening transactions at level L (READ COMMITTED by default).
type MariaDB[L MySQLOpens] struct{ mariadb }

// Level names L.
func (MariaDB[L]) Level() Level { return levelOf[L]() }

// Begin pins a connection and opens the transaction on it at READ COMMITTED by default and at
// the declared level otherwise.
func (d MariaDB[L]) Begin(ctx context.Context, db *sql.DB) (Tx, error) { return begin(ctx, d, db) }

// SQLite is SQLite 3.35 or later (for RETURNING), opening transactions in mode M. Use it with
// WAL and a busy timeout; the library keeps one claim in flight per consumer on SQLite, since
// concurrent claims of one writer only collide.
type SQLite[M SQLiteOpens] struct{ sqlite }

// Level names M.
func (SQLite[M]) Level() Level { return levelOf[M]() }

// Begin pins a connection and issues BEGIN, BEGIN DEFERRED, BEGIN IMMEDIATE or BEGIN EXCLUSIVE
// on it. The connection goes back to the pool only after COMMIT or ROLLBACK; one whose ROLLBACK
// fails is discarded rather than returned with a transaction open.
func (d SQLite[M]) Begin(ctx context.Context, db *sql.DB) (Tx, error) { return begin(ctx, d, db) }

// The level-independent halves of the dialects.
type (
	postgres struct{}
	mysql    struct{}
	mariadb  struct{}
	sqlite   struct{}
)

func (postgres) Name() string { return "postgres" }
func (mysql) Name() string    { return "mysql" }
func (mariadb) Name() string  { return "mariadb" }
func (sqlite) Name() string   { return "sqlite" }

func (postgres) Quote(ident string) (string, error) { return quote(&postgresCaps, ident) }
func (mysql) Quote(ident string) (string, error)    { return quote(&mysqlCaps, ident) }
func (mariadb) Quote(ident string) (string, error)  { return quote(&mariadbCaps, ident) }
func (sqlite) Quote(ident string) (string, error)   { return quote(&sqliteCaps, ident) }

func (postgres) Placeholder(n int) string { return dollar(n) }
func (mysql) Placeholder(int) string      { return "?" }
func (mariadb) Placeholder(int) string    { return "?" }
func (sqlite) Placeholder(int) string     { return "?" }

func (postgres) Time(t time.Time) any { return serverTime(t) }
func (mysql) Time(t time.Time) any    { return serverTime(t) }
func (mariadb) Time(t time.Time) any  { return serverTime(t) }
func (sqlite) Time(t time.Time) any   { return sqliteTime(t) }

func (postgres) CheckServer(ctx context.Context, db *sql.DB) error {
	return checkPostgres(ctx, db)
}
func (mysql) CheckServer(ctx context.Context, db *sql.DB) error {
	return checkMySQLFamily(ctx, db, false)
}
func (mariadb) CheckServer(ctx context.Context, db *sql.DB) error {
	return checkMySQLFamily(ctx, db, true)
}
func (sqlite) CheckServer(ctx context.Context, db *sql.DB) error { return checkSQLite(ctx, db) }

func (postgres) Allows(Form) error { return nil }
func (mysql) Allows(Form) error    { return nil }
func (mariadb) Allows(Form) error  { return nil }
func (sqlite) Allows(Form) error   { return nil }

func (postgres) Retryable(err error) bool { return retryable(&postgresCaps, err) }
func (mysql) Retryable(err error) bool    { return retryable(&mysqlCaps, err) }
func (mariadb) Retryable(err error) bool  { return retryable(&mariadbCaps, err) }
func (sqlite) Retryable(err error) bool   { return retryable(&sqliteCaps, err) }

// RowLocks reports that Postgres takes the row lock form.
func (postgres) RowLocks() SkipLocked { return SkipLocked{} }

// RowLocks reports that MySQL takes the row lock form.
func (mysql) RowLocks() SkipLocked { return SkipLocked{} }

// RowLocks reports that MariaDB takes the row lock form.
func (mariadb) RowLocks() SkipLocked { return SkipLocked{} }

// RowLocks reports that SQLite has no row locks; its type makes rowlock.New on SQLite a compile
// error that names the lease form.
func (sqlite) RowLocks() NoRowLocksOnSQLiteUseLease { return NoRowLocksOnSQLiteUseLease{} }

// SessionLocks reports that Postgres takes the advisory form.
func (postgres) SessionLocks() AdvisoryLocks { return AdvisoryLocks{} }

// SessionLocks reports that MySQL takes the advisory form.
func (mysql) SessionLocks() AdvisoryLocks { return AdvisoryLocks{} }

// SessionLocks reports that MariaDB takes the advisory form.
func (mariadb) SessionLocks() AdvisoryLocks { return AdvisoryLocks{} }

// SessionLocks reports that SQLite has no session locks; its type makes advisory.New on SQLite
// a compile error that names the lease form.
func (sqlite) SessionLocks() NoSessionLocksOnSQLiteUseLease {
	return NoSessionLocksOnSQLiteUseLease{}
}
