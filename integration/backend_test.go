package integration

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// backend is one database the suite runs on, under one dialect at its default level.
type backend struct {
	name    string // "postgres", "mysql" (a MariaDB server under the MySQL dialect), "mariadb", "sqlite"
	dialect dialect.Dialect
	driver  string
	dsn     string
}

// backends lists every database × dialect cell; forms that do not run on SQLite pass sqlite=false.
func backends(t *testing.T, sqlite bool) []backend {
	t.Helper()
	servers := startServers(t)
	bs := []backend{
		{"postgres", dialect.Postgres[isolation.Default]{}, "pgx", servers.postgres},
		{"mysql", dialect.MySQL[isolation.Default]{}, "mysql", servers.mysql},
		{"mariadb", dialect.MariaDB[isolation.Default]{}, "mysql", servers.mariadb},
	}
	if sqlite {
		bs = append(bs, backend{"sqlite", dialect.SQLite[isolation.Default]{}, "sqlite", ""})
	}
	return bs
}

// open opens the backend's database for one test, with a pool of poolSize (0: 16), closed when
// the test ends. SQLite gets a new file in WAL mode with a busy timeout.
func (b backend) open(t *testing.T, poolSize int) *sql.DB {
	t.Helper()
	if poolSize == 0 {
		poolSize = 16
	}
	dsn := b.dsn
	if b.name == "sqlite" {
		dsn = SQLiteDSN(filepath.Join(t.TempDir(), "inbox.db"))
	}
	if dsn == "" {
		skipOrFail(t, fmt.Sprintf("%s: no server", b.name))
	}
	db, err := sql.Open(b.driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		skipOrFail(t, fmt.Sprintf("%s unreachable at %s: %v", b.name, dsn, err))
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// SQLiteDSN is the DSN of a SQLite file in WAL mode with a 5 s busy timeout.
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
}

func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("INBOX_REQUIRE_DATABASES") == "1" {
		t.Fatalf("database required (INBOX_REQUIRE_DATABASES=1): %s", why)
	}
	t.Skip(why)
}

// tableName is a table name of the test's own, short enough for every database. It carries the
// process id, so that two test processes on one server never share a table.
func tableName(t *testing.T) string {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return fmt.Sprintf("inbox_%d_%x", os.Getpid(), h.Sum64())
}

// fullTable describes a table with every role (and the lease's locked_until column).
func fullTable(name string) inbox.Table {
	return inbox.Table{
		Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
		ProcessedAt: "processed_at", Queue: "grp", Priority: "priority",
		RetryAfter: "retry_after", Headers: "headers",
	}
}

// minimalTable describes a table with an id and a payload only.
func minimalTable(name string) inbox.Table {
	return inbox.Table{Name: name, ID: "id", IDGenerated: true, Payload: "payload"}
}

// createTable creates (anew) the table t describes on the backend, with a locked_until column
// for the lease form, and drops it when the test ends.
func (b backend) createTable(t *testing.T, db *sql.DB, tbl inbox.Table) {
	t.Helper()
	ctx := context.Background()
	q := func(s string) string {
		s, err := b.dialect.Quote(s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var ts, blob, id, text, key string
	switch b.name {
	case "postgres":
		ts, blob, id, text, key = "TIMESTAMPTZ", "BYTEA", "BIGSERIAL PRIMARY KEY", "TEXT", "TEXT"
	case "sqlite":
		ts, blob, id, text, key = "TEXT", "BLOB", "INTEGER PRIMARY KEY", "TEXT", "TEXT"
	default:
		ts, blob, id, text, key = "DATETIME(6) NULL", "LONGBLOB", "BIGINT AUTO_INCREMENT PRIMARY KEY", "TEXT", "VARCHAR(191)"
	}
	if !tbl.IDGenerated {
		id = "BIGINT PRIMARY KEY"
	}
	cols := []string{q(tbl.ID) + " " + id}
	add := func(name, typ string) {
		if name != "" {
			cols = append(cols, q(name)+" "+typ)
		}
	}
	add(tbl.Payload, blob)
	add(tbl.Attempt, "INT NOT NULL DEFAULT 0")
	add(tbl.ProcessedAt, ts)
	add(tbl.Queue, key+" NOT NULL DEFAULT ''")
	add(tbl.Priority, "INT NOT NULL DEFAULT 0")
	add(tbl.RetryAfter, ts)
	add(tbl.Headers, text)
	add(tbl.DeadAt, ts)
	add(tbl.LastError, text)
	add("locked_until", ts)
	drop := "DROP TABLE IF EXISTS " + q(tbl.Name)
	mustExec(t, db, drop)
	mustExec(t, db, "CREATE TABLE "+q(tbl.Name)+" ("+strings.Join(cols, ", ")+")")
	if b.name == "mysql" || b.name == "mariadb" {
		// The claim index the README documents: the claim's equality columns first (group, and
		// processed_at IS NULL), then the claim order, so a claim reads only its queue's
		// pending rows and locks no others.
		var order []string
		for _, c := range []string{tbl.Queue, tbl.ProcessedAt, tbl.Priority, tbl.RetryAfter, tbl.ID} {
			if c != "" {
				order = append(order, q(c))
			}
		}
		mustExec(t, db, "CREATE INDEX "+q(tbl.Name+"_claim")+" ON "+q(tbl.Name)+" ("+strings.Join(order, ", ")+")")
	}
	t.Cleanup(func() { db.ExecContext(ctx, drop) })
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count returns the single integer query answers.
func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

var serversOnce struct {
	sync.Once
	s servers
}

type servers struct{ postgres, mysql, mariadb string }

// startServers returns the DSNs of the servers: containers started through dockertest when a
// Docker engine answers, the environment's (or the defaults) otherwise.
func startServers(t *testing.T) servers {
	serversOnce.Do(func() {
		if s, ok := dockerServers(); ok {
			serversOnce.s = s
			return
		}
		s := servers{
			postgres: envOr("INBOX_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
			mysql:    envOr("INBOX_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test"),
		}
		s.mariadb = envOr("INBOX_MARIADB_DSN", s.mysql)
		serversOnce.s = s
	})
	return serversOnce.s
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
