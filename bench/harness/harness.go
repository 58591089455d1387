// Package harness is what the benchmark commands under bench/cmd share: the databases opened
// for a run, the bench table created and prefilled, a drain through the library's consumer
// timed and checked, allocations counted, rounds run in turning order, cells drained two ways
// and paired, and the medians and paired ratios the tables print.
//
// Everything the harness asks of the library's consumer and forms is in library.go, so that a
// change of the library's API touches that one file.
package harness

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"runtime"
	"strings"

	_ "github.com/glebarez/go-sqlite"

	"github.com/sqlinbox/inbox/dialect"
)

// Databases are the databases a run can name, in the order the tables show them: mysql is the
// MySQL dialect on whatever server its DSN names (MariaDB here), mariadb the MariaDB dialect.
var Databases = []string{"postgres", "mysql", "mariadb", "sqlite"}

// DefaultDSNs are the servers of the development machines; SQLite takes a file path.
var DefaultDSNs = map[string]string{
	"postgres": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	"mysql":    "root@tcp(127.0.0.1:3306)/test",
	"mariadb":  "root@tcp(127.0.0.1:3306)/test",
}

// Target is one database opened for a run.
type Target struct {
	Name string // postgres, mysql, mariadb or sqlite
	DSN  string
	D    dialect.Runtime
	DB   *sql.DB
	// Trips counts what the pool's connections send, when the target was opened by
	// OpenCounting; nil otherwise.
	Trips *Trips
}

// Open opens database name at dsn under the dialect of that name (the mysql target runs the
// MySQL dialect whatever the server, so that it stands in for MySQL on a MariaDB server), with
// a pool of pool connections.
func Open(ctx context.Context, name, dsn string, pool int) (*Target, error) {
	return open(ctx, name, dsn, pool, nil)
}

// OpenCounting is Open with the round trips and commits of every connection counted in the
// target's Trips (see Trips for what is counted).
func OpenCounting(ctx context.Context, name, dsn string, pool int) (*Target, error) {
	return open(ctx, name, dsn, pool, new(Trips))
}

func open(ctx context.Context, name, dsn string, pool int, trips *Trips) (*Target, error) {
	driverName, source := "", dsn
	switch name {
	case "postgres":
		driverName = "pgx"
	case "mysql", "mariadb":
		driverName, source = "mysql", strings.TrimPrefix(dsn, "mysql://")
	case "sqlite":
		driverName, source = "sqlite", sqliteTarget(dsn)
	default:
		return nil, fmt.Errorf("unknown database %q: want one of %s", name, strings.Join(Databases, ", "))
	}
	d, err := dialect.Parse(name, "")
	if err != nil {
		return nil, err
	}
	var db *sql.DB
	if trips == nil {
		db, err = sql.Open(driverName, source)
	} else {
		var c driver.Connector
		if c, err = trips.connector(driverName, source); err == nil {
			db = sql.OpenDB(c)
		}
	}
	if err != nil {
		return nil, err
	}
	t := &Target{Name: name, DSN: dsn, D: d, DB: db, Trips: trips}
	t.SetPool(pool)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s at %s: %w (name another with -dsn, or leave it out with -db)", name, dsn, err)
	}
	return t, nil
}

// SetPool sets the pool's open and idle connections to n.
func (t *Target) SetPool(n int) {
	t.DB.SetMaxOpenConns(n)
	t.DB.SetMaxIdleConns(n)
}

// Close closes the pool.
func (t *Target) Close() error { return t.DB.Close() }

// SQLiteDSN is the driver's DSN for a SQLite file as every contender opens it: WAL, a busy
// timeout, and synchronous FULL, so that every commit is on disk, as it is on the servers (fsync
// on).
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)"
}

// sqliteTarget is a target's SQLite DSN: a "file:" DSN as given, a path as SQLiteDSN opens it
// and with BEGIN IMMEDIATE for database/sql's transactions, as the lease form begins its claims
// (the raw loop's claims run in those).
func sqliteTarget(dsn string) string {
	if strings.HasPrefix(dsn, "file:") {
		return dsn
	}
	return SQLiteDSN(dsn) + "&_txlock=immediate"
}

// Facts describes the database's version and durability settings.
func (t *Target) Facts(ctx context.Context) string {
	q := func(query string) string {
		var s string
		if err := t.DB.QueryRowContext(ctx, query).Scan(&s); err != nil {
			return "?"
		}
		return s
	}
	switch t.Name {
	case "postgres":
		return fmt.Sprintf("PostgreSQL %s, fsync=%s, synchronous_commit=%s", q("SHOW server_version"), q("SHOW fsync"), q("SHOW synchronous_commit"))
	case "sqlite":
		return fmt.Sprintf("SQLite %s (github.com/glebarez/go-sqlite), journal_mode=%s, synchronous=%s (2 = FULL)", q("SELECT sqlite_version()"), q("PRAGMA journal_mode"), q("PRAGMA synchronous"))
	}
	var name, flush string
	if err := t.DB.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'innodb_flush_log_at_trx_commit'").Scan(&name, &flush); err != nil {
		flush = "?"
	}
	return fmt.Sprintf("%s, innodb_flush_log_at_trx_commit=%s", q("SELECT VERSION()"), flush)
}

// Machine describes what every figure depends on beside the databases: cores and Go.
func Machine() string {
	return fmt.Sprintf("%d cores (GOMAXPROCS %d), %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
}

// Label names a database as the tables show it.
func Label(db string) string {
	switch db {
	case "postgres":
		return "Postgres"
	case "mysql":
		return "MySQL dialect"
	case "mariadb":
		return "MariaDB"
	}
	return "SQLite"
}
