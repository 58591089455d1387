// Package harnesstest gives the benchmark commands' tests a database of their own on each
// server, and runs a command's tiny run on each database side by side.
package harnesstest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlinbox/inbox/bench/harness"
)

// Scratch creates a database of the test's own, called prefix_<pid>_<db>, on the server of
// database db (postgres, mysql or mariadb) and returns its DSN; the database is dropped when the
// test ends. The server is the live tests' (INBOX_POSTGRES_DSN, INBOX_MYSQL_DSN,
// INBOX_MARIADB_DSN; harness.DefaultDSNs when unset), and a Postgres scratch database commits
// without waiting for the disk: the tests measure nothing. A bench table of the test's then
// never meets one of a bench run, or of another test process, on the same server. A server that
// does not answer returns false, and fails the test under INBOX_REQUIRE_DATABASES=1.
func Scratch(ctx context.Context, t *testing.T, prefix, db string) (string, bool) {
	t.Helper()
	dsn := os.Getenv("INBOX_" + strings.ToUpper(db) + "_DSN")
	if dsn == "" {
		dsn = harness.DefaultDSNs[db]
	}
	scratch, err := create(ctx, t, fmt.Sprintf("%s_%d_%s", prefix, os.Getpid(), db), db, dsn)
	if err != nil {
		if os.Getenv("INBOX_REQUIRE_DATABASES") == "1" {
			t.Fatalf("database required (INBOX_REQUIRE_DATABASES=1): %s at %s: %v", db, dsn, err)
		}
		t.Logf("%s left out: %v", db, err)
		return "", false
	}
	return scratch, true
}

func create(ctx context.Context, t *testing.T, scratch, db, dsn string) (string, error) {
	driver, source := "pgx", dsn
	var (
		scratchDSN, drop string
		create           []string
	)
	switch db {
	case "postgres":
		u, err := url.Parse(dsn)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return "", fmt.Errorf("want a postgres:// URL, got %q", dsn)
		}
		u.Path = "/" + scratch
		scratchDSN = u.String()
		create = []string{`CREATE DATABASE "` + scratch + `"`, `ALTER DATABASE "` + scratch + `" SET synchronous_commit = off`}
		// FORCE (Postgres 13 or later): a peer's pool may still be closing.
		drop = `DROP DATABASE IF EXISTS "` + scratch + `" WITH (FORCE)`
	case "mysql", "mariadb":
		mc, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
		if err != nil {
			return "", err
		}
		driver, source = "mysql", mc.FormatDSN()
		mc.DBName = scratch
		scratchDSN = mc.FormatDSN()
		create = []string{"CREATE DATABASE `" + scratch + "`"}
		drop = "DROP DATABASE IF EXISTS `" + scratch + "`"
	default:
		return "", fmt.Errorf("no server for database %q", db)
	}
	conn, err := sql.Open(driver, source)
	if err != nil {
		return "", err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := conn.PingContext(pingCtx); err != nil {
		conn.Close()
		return "", err
	}
	t.Cleanup(func() {
		defer conn.Close()
		if _, err := conn.ExecContext(context.Background(), drop); err != nil {
			t.Errorf("%s: %v", drop, err)
		}
	})
	for _, q := range create {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	return scratchDSN, nil
}
