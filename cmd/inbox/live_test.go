package main

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// liveDSN is a database the live tests run the command against, by the DSN the command takes.
type liveDSN struct{ name, dsn string }

// liveDSNs are Postgres, MariaDB (under the mariadb:// and the mysql:// scheme) and SQLite, from
// the environment as the integration tests take it (see integration/doc.go); a server that
// does not answer skips its cases, or fails the test under INBOX_REQUIRE_DATABASES=1.
func liveDSNs(t *testing.T) []liveDSN {
	t.Helper()
	pg := env("INBOX_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	maria := env("INBOX_MARIADB_DSN", env("INBOX_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test"))
	var out []liveDSN
	for _, l := range []liveDSN{
		{"postgres", pg},
		{"mariadb", "mariadb://" + strings.TrimPrefix(maria, "mysql://")},
		{"mysql", "mysql://" + strings.TrimPrefix(maria, "mysql://")},
		{"sqlite", filepath.Join(t.TempDir(), "live.db")},
	} {
		tg, err := parseDSN(l.dsn)
		if err != nil {
			t.Fatal(err)
		}
		db, err := open(context.Background(), tg, 1, createFile)
		if err != nil {
			if os.Getenv("INBOX_REQUIRE_DATABASES") == "1" {
				t.Fatalf("database required (INBOX_REQUIRE_DATABASES=1): %v", err)
			}
			t.Logf("skipping %s: %v", l.name, err)
			continue
		}
		db.Close()
		out = append(out, l)
	}
	return out
}

// liveDB opens the database of l, on a pool of two connections, for a test's own statements, and
// closes it when the test ends.
func liveDB(t *testing.T, l liveDSN) (*sql.DB, target) {
	t.Helper()
	tg, err := parseDSN(l.dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := open(context.Background(), tg, 2, createFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, tg
}

// tableName is a table name of the test's and the process's own, so that parallel runs do not
// collide.
func tableName(t *testing.T) string {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return fmt.Sprintf("inbox_demo_%d_%x", os.Getpid(), h.Sum64())
}
