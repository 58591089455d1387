package integration

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// isMariaDB asks the server a question only MariaDB answers (Aria is always built into MariaDB
// and never into MySQL), so that the test does not read VERSION() the way Detect does.
func isMariaDB(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var size int64
	return db.QueryRowContext(context.Background(), "SELECT @@aria_block_size").Scan(&size) == nil
}

func TestDetectAndCheckServer(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 2)
		want := b.name
		if b.name == "mysql" && isMariaDB(t, db) {
			want = "mariadb" // a MariaDB server stands in for MySQL
		}
		if b.name == "mariadb" && !isMariaDB(t, db) {
			t.Fatalf("the MariaDB DSN %s reaches a server that is not MariaDB", b.dsn)
		}
		d, err := dialect.Detect(ctx, db)
		if err != nil {
			t.Fatalf("Detect: %v", err)
		}
		if d.Name() != want || d.Level() != "default" {
			t.Errorf("Detect = %s at %s, want %s at default", d.Name(), d.Level(), want)
		}
		if err := b.dialect.CheckServer(ctx, db); err != nil {
			t.Errorf("%s.CheckServer: %v", b.name, err)
		}
		if err := d.CheckServer(ctx, db); err != nil {
			t.Errorf("the detected dialect's CheckServer: %v", err)
		}
	})
}

// TestMySQLFamilyToldApart: the MySQL dialect runs on both servers, the MariaDB dialect only on
// MariaDB.
func TestMySQLFamilyToldApart(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "mysql", "mariadb"), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 2)
		if err := (dialect.MySQL[isolation.Default]{}).CheckServer(ctx, db); err != nil {
			t.Errorf("the MySQL dialect on this server: %v", err)
		}
		err := dialect.MariaDB[isolation.Default]{}.CheckServer(ctx, db)
		if isMariaDB(t, db) {
			if err != nil {
				t.Errorf("the MariaDB dialect on MariaDB: %v", err)
			}
			return
		}
		if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "dialect.MySQL") {
			t.Errorf("the MariaDB dialect on MySQL: %v, want inbox.ErrDialect pointing to dialect.MySQL", err)
		}
	})
	t.Run("postgres is neither", func(t *testing.T) {
		db := postgresBackend(t).open(t, 2)
		for _, d := range []dialect.Dialect{dialect.MySQL[isolation.Default]{}, dialect.MariaDB[isolation.Default]{}} {
			if err := d.CheckServer(context.Background(), db); err == nil {
				t.Errorf("the %s dialect passed its check on Postgres", d.Name())
			}
		}
	})
}

// sqliteFile opens a SQLite file in WAL mode twice: first with the harness's busy timeout, and
// second with none, so that a write the first one's lock blocks fails at once with SQLITE_BUSY
// rather than waiting. Each pool has one connection.
func sqliteFile(t *testing.T) (first, second *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inbox.db")
	b := backendNamed("sqlite", "")
	first = b.openDSN(t, SQLiteDSN(path), 1)
	second = b.openDSN(t, "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(0)", 1)
	mustExec(t, first, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
	return first, second
}

// TestSQLiteModeTakesTheWriteLock: a transaction begun Immediate or Exclusive holds SQLite's
// write lock from BEGIN, before it has written anything, so another writer gets SQLITE_BUSY;
// one begun Deferred (or by default) takes it only at its first write.
func TestSQLiteModeTakesTheWriteLock(t *testing.T) {
	tests := []struct {
		d         dialect.Dialect
		locksThem bool
	}{
		{dialect.SQLite[isolation.Immediate]{}, true},
		{dialect.SQLite[isolation.Exclusive]{}, true},
		{dialect.SQLite[isolation.Deferred]{}, false},
		{dialect.SQLite[isolation.Default]{}, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.d.Level()), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			first, second := sqliteFile(t)
			tx := beginWith(t, ctx, tt.d, first)
			defer tx.Rollback()

			_, insertErr := second.ExecContext(ctx, "INSERT INTO t (v) VALUES ('second')")
			_, beginErr := second.ExecContext(ctx, "BEGIN IMMEDIATE")
			if beginErr == nil {
				mustExec(t, second, "ROLLBACK")
			}
			if !tt.locksThem {
				if insertErr != nil || beginErr != nil {
					t.Fatalf("with a %s transaction only begun, another writer failed: INSERT: %v; BEGIN IMMEDIATE: %v", tt.d.Level(), insertErr, beginErr)
				}
				return
			}
			for what, err := range map[string]error{"INSERT": insertErr, "BEGIN IMMEDIATE": beginErr} {
				if err == nil {
					t.Errorf("with a %s transaction only begun, another writer's %s succeeded", tt.d.Level(), what)
				} else if !tt.d.Retryable(err) {
					t.Errorf("another writer's %s failed with %v, which is not SQLITE_BUSY", what, err)
				}
			}
			if err := tx.Rollback(); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			if _, err := second.ExecContext(ctx, "INSERT INTO t (v) VALUES ('second')"); err != nil {
				t.Errorf("after the rollback the other writer still cannot write: %v", err)
			}
		})
	}
}

// TestSQLiteTxLeavesNoTransactionOnThePool: whichever way a SQLite transaction ends, its
// connection goes back to the pool outside any transaction, with the transaction's writes
// gone unless it committed.
func TestSQLiteTxLeavesNoTransactionOnThePool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	// A deferred foreign key makes COMMIT fail, and SQLite keeps the transaction open when it does.
	// One connection: the one the transaction had is the one the checks get.
	db := backendNamed("sqlite", "").openDSN(t, SQLiteDSN(path)+"&_pragma=foreign_keys(1)", 1)
	mustExec(t, db, "CREATE TABLE parent (id INTEGER PRIMARY KEY)")
	mustExec(t, db, "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
	d := dialect.SQLite[isolation.Immediate]{}

	// ended checks, once a transaction has ended, that its connection is back in the pool
	// outside any transaction and that query counts want rows; after says how it ended.
	ended := func(t *testing.T, after, query string, want int) {
		t.Helper()
		// BEGIN inside an open transaction fails: "cannot start a transaction within a transaction".
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("the pooled connection is still in a transaction: %v", err)
		}
		tx.Rollback()
		if n := count(t, db, query); n != want {
			t.Errorf("%d rows after %s, want %d", n, after, want)
		}
	}

	t.Run("rollback", func(t *testing.T) {
		tx := beginWith(t, ctx, d, db, "INSERT INTO parent (id) VALUES (1)")
		if err := tx.Rollback(); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		ended(t, "the rollback", "SELECT COUNT(*) FROM parent", 0)
	})

	t.Run("failed commit", func(t *testing.T) {
		tx := beginWith(t, ctx, d, db, "INSERT INTO parent (id) VALUES (2)", "INSERT INTO child (id, parent) VALUES (1, 99)")
		if err := tx.Commit(); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
			t.Fatalf("Commit: %v, want the deferred foreign key's failure", err)
		}
		ended(t, "the failed commit", "SELECT (SELECT COUNT(*) FROM parent) + (SELECT COUNT(*) FROM child)", 0)
	})

	t.Run("commit", func(t *testing.T) {
		tx := beginWith(t, ctx, d, db, "INSERT INTO parent (id) VALUES (3)")
		if err := tx.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		ended(t, "the commit", "SELECT COUNT(*) FROM parent WHERE id = 3", 1)
	})
}

// A typed dialect on another database's server fails its check with ErrDialect, naming both.
func TestCheckServerRefusesAnotherDatabase(t *testing.T) {
	servers := map[string]backend{}
	for _, b := range backends(t, true) {
		servers[b.name] = b
	}
	for _, tc := range []struct{ dialect, server string }{
		{"mysql", "postgres"}, {"mariadb", "postgres"}, {"sqlite", "postgres"},
		{"postgres", "mariadb"}, {"sqlite", "mariadb"}, {"postgres", "sqlite"}, {"mysql", "sqlite"},
	} {
		t.Run(tc.dialect+"_on_"+tc.server, func(t *testing.T) {
			db := servers[tc.server].open(t, 0)
			err := servers[tc.dialect].dialect.CheckServer(context.Background(), db)
			if !errors.Is(err, inbox.ErrDialect) {
				t.Fatalf("the %s dialect on a %s server: %v, want ErrDialect", tc.dialect, tc.server, err)
			}
		})
	}
}

// When SQLite ends a transaction by itself (here: a write interrupted by its context), the
// statements after it are refused and Commit fails, rather than running in autocommit outside
// the transaction.
func TestSQLiteTransactionEndedBySQLiteRefusesLaterStatements(t *testing.T) {
	b := backends(t, true)[3]
	db := b.open(t, 4)
	mustExec(t, db, "CREATE TABLE interrupted (x INTEGER)")
	ctx := context.Background()
	tx := beginWith(t, ctx, dialect.SQLite[isolation.Deferred]{}, db, "INSERT INTO interrupted VALUES (1)")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := tx.ExecContext(short, "INSERT INTO interrupted WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000000000) SELECT x FROM c")
	if err == nil {
		t.Fatal("a billion-row insert finished within 50 ms; the test cannot interrupt it")
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO interrupted VALUES (2)"); err == nil {
		t.Error("a statement after SQLite ended the transaction ran")
	}
	if err := tx.Commit(); err == nil {
		t.Error("Commit succeeded after SQLite ended the transaction")
	}
	if n := count(t, db, "SELECT COUNT(*) FROM interrupted"); n != 0 {
		t.Errorf("%d rows landed outside the transaction SQLite rolled back", n)
	}
}
