package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox/dialect"
)

// openDSN opens the database a DSN names: postgres:// or postgresql:// (pgx), mysql://user@tcp(host)/db
// (MySQL or MariaDB), and anything else as a SQLite file path (WAL, busy timeout). The dialect
// comes from the live connection.
func openDSN(ctx context.Context, dsn string, pool int) (*sql.DB, dialect.Dialect, error) {
	driver, source := "sqlite", ""
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		driver, source = "pgx", dsn
	case strings.HasPrefix(dsn, "mysql://"):
		driver, source = "mysql", strings.TrimPrefix(dsn, "mysql://")
	default:
		path, err := filepath.Abs(strings.TrimPrefix(dsn, "sqlite://"))
		if err != nil {
			return nil, nil, err
		}
		source = "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)"
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("connecting to %s: %w", dsn, err)
	}
	d, err := dialect.Detect(ctx, db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, d, nil
}

// createTable creates (anew) the demo's table with every role and a lease column.
func createTable(ctx context.Context, db *sql.DB, d dialect.Dialect, name string) error {
	q, err := d.Quote(name)
	if err != nil {
		return err
	}
	var ddl string
	switch d.Name() {
	case "postgres":
		ddl = `CREATE TABLE ` + q + ` (id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0,
			processed_at TIMESTAMPTZ, priority INT NOT NULL DEFAULT 0, retry_after TIMESTAMPTZ, locked_until TIMESTAMPTZ)`
	case "sqlite":
		ddl = `CREATE TABLE ` + q + ` (id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0,
			processed_at TEXT, priority INTEGER NOT NULL DEFAULT 0, retry_after TEXT, locked_until TEXT)`
	default:
		ddl = `CREATE TABLE ` + q + ` (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, attempt INT NOT NULL DEFAULT 0,
			processed_at DATETIME(6) NULL, priority INT NOT NULL DEFAULT 0, retry_after DATETIME(6) NULL,
			locked_until DATETIME(6) NULL, INDEX claim_order (priority, retry_after, id))`
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+q); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, ddl)
	return err
}
