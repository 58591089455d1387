package dialect_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestLevelMapping pins what each typed dialect declares and how its Begin opens the
// transaction: the isolation level database/sql hands the driver (Default means a plain BEGIN),
// or on SQLite the BEGIN statement issued on the pinned connection. MySQL and MariaDB ask the
// session's level first (see TestSessionLevel); this server names none, so the level is set.
func TestLevelMapping(t *testing.T) {
	tests := []struct {
		d     dialect.Dialect
		name  string
		level string
		begin string // the first thing the connection is asked
	}{
		{dialect.Postgres[isolation.Default]{}, "postgres", "default", "begin at Default"},
		{dialect.Postgres[isolation.ReadCommitted]{}, "postgres", "read committed", "begin at Read Committed"},
		{dialect.Postgres[isolation.RepeatableRead]{}, "postgres", "repeatable read", "begin at Repeatable Read"},
		{dialect.Postgres[isolation.Serializable]{}, "postgres", "serializable", "begin at Serializable"},

		{dialect.MySQL[isolation.Default]{}, "mysql", "default", "begin at Read Committed"},
		{dialect.MySQL[isolation.ReadUncommitted]{}, "mysql", "read uncommitted", "begin at Read Uncommitted"},
		{dialect.MySQL[isolation.ReadCommitted]{}, "mysql", "read committed", "begin at Read Committed"},
		{dialect.MySQL[isolation.RepeatableRead]{}, "mysql", "repeatable read", "begin at Repeatable Read"},
		{dialect.MySQL[isolation.Serializable]{}, "mysql", "serializable", "begin at Serializable"},

		{dialect.MariaDB[isolation.Default]{}, "mariadb", "default", "begin at Read Committed"},
		{dialect.MariaDB[isolation.ReadUncommitted]{}, "mariadb", "read uncommitted", "begin at Read Uncommitted"},
		{dialect.MariaDB[isolation.ReadCommitted]{}, "mariadb", "read committed", "begin at Read Committed"},
		{dialect.MariaDB[isolation.RepeatableRead]{}, "mariadb", "repeatable read", "begin at Repeatable Read"},
		{dialect.MariaDB[isolation.Serializable]{}, "mariadb", "serializable", "begin at Serializable"},

		{dialect.SQLite[isolation.Default]{}, "sqlite", "default", "exec BEGIN"},
		{dialect.SQLite[isolation.Deferred]{}, "sqlite", "deferred", "exec BEGIN DEFERRED"},
		{dialect.SQLite[isolation.Immediate]{}, "sqlite", "immediate", "exec BEGIN IMMEDIATE"},
		{dialect.SQLite[isolation.Exclusive]{}, "sqlite", "exclusive", "exec BEGIN EXCLUSIVE"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.level, func(t *testing.T) {
			if got := tt.d.Name(); got != tt.name {
				t.Errorf("Name() = %q, want %q", got, tt.name)
			}
			if got := tt.d.Level(); got != dialect.Level(tt.level) {
				t.Errorf("Level() = %q, want %q", got, tt.level)
			}
			f := &fakeDB{}
			_, tx := f.begin(t, context.Background(), tt.d)
			if err := tx.Rollback(); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			end := "rollback"
			if tt.name == "sqlite" {
				end = "exec ROLLBACK"
			}
			f.wantAsked(t, append(asks(tt.d, "conn1"), "conn1: "+tt.begin, "conn1: "+end))
		})
	}
}

// TestSQLiteTxEndsItsTransaction: a SQLite transaction is a pinned connection inside BEGIN, and
// that connection must never go back to the pool with the transaction open.
func TestSQLiteTxEndsItsTransaction(t *testing.T) {
	ctx := context.Background()
	busy := errors.New("database is locked (5) (SQLITE_BUSY)")
	d := dialect.SQLite[isolation.Immediate]{}

	t.Run("commit", func(t *testing.T) {
		f := &fakeDB{}
		db, tx := f.begin(t, ctx, d)
		if err := tx.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		reuse(t, db)
		f.wantAsked(t, []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec COMMIT", "conn1: exec SELECT 1"})
	})

	t.Run("failed commit rolls back", func(t *testing.T) {
		f := &fakeDB{fail: map[string]error{"COMMIT": busy}}
		db, tx := f.begin(t, ctx, d)
		if err := tx.Commit(); !errors.Is(err, busy) {
			t.Fatalf("Commit: %v, want the COMMIT's error", err)
		}
		reuse(t, db)
		f.wantAsked(t, []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec COMMIT", "conn1: exec ROLLBACK", "conn1: exec SELECT 1"})
	})

	t.Run("failed rollback discards the connection", func(t *testing.T) {
		f := &fakeDB{fail: map[string]error{"ROLLBACK": errors.New("disk I/O error")}}
		db, tx := f.begin(t, ctx, d)
		if err := tx.Rollback(); err == nil {
			t.Fatal("Rollback succeeded although ROLLBACK failed")
		}
		reuse(t, db)
		f.wantAsked(t, []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec ROLLBACK", "conn1: close", "conn2: exec SELECT 1"})
	})

	t.Run("failed begin", func(t *testing.T) {
		f := &fakeDB{fail: map[string]error{"BEGIN IMMEDIATE": busy}}
		db := f.open(t)
		if _, err := d.Begin(ctx, db); !errors.Is(err, busy) {
			t.Fatalf("Begin: %v, want the BEGIN's error", err)
		}
		reuse(t, db)
		f.wantAsked(t, []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec SELECT 1"})
	})
}

// reuse runs a statement on the pool (of one connection), showing which connection the pool
// hands out next.
func reuse(t *testing.T, db *sql.DB) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

// TestServerTxEndsItsTransaction: a Postgres, MySQL or MariaDB transaction runs on a pinned
// connection, and a connection whose COMMIT or ROLLBACK failed, or whose transaction database/sql
// rolled back when its context ended, is discarded, never returned to the pool, where its
// session might still have the transaction open. A failed Commit says whether it may have
// committed.
func TestServerTxEndsItsTransaction(t *testing.T) {
	ctx := context.Background()
	for _, d := range []dialect.Dialect{dialect.Postgres[isolation.Default]{}, dialect.MariaDB[isolation.Default]{}} {
		begin := []string{"conn1: begin at Default"}
		if d.Name() != "postgres" {
			begin = append(asks(d, "conn1"), "conn1: begin at Read Committed")
		}
		t.Run(d.Name()+"/commit", func(t *testing.T) {
			f := &fakeDB{}
			db, tx := f.begin(t, ctx, d)
			if err := tx.Commit(); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
				t.Fatalf("Rollback after Commit: %v, want sql.ErrTxDone", err)
			}
			reuse(t, db)
			f.wantAsked(t, slices.Concat(begin, []string{"conn1: commit", "conn1: exec SELECT 1"}))
		})

		t.Run(d.Name()+"/failed rollback discards the connection", func(t *testing.T) {
			f := &fakeDB{fail: map[string]error{"rollback": errors.New("write: broken pipe")}}
			db, tx := f.begin(t, ctx, d)
			if err := tx.Rollback(); err == nil {
				t.Fatal("Rollback succeeded although ROLLBACK failed")
			}
			reuse(t, db)
			f.wantAsked(t, slices.Concat(begin, []string{"conn1: rollback", "conn1: close", "conn2: exec SELECT 1"}))
		})

		t.Run(d.Name()+"/rollback forced by the context discards the connection", func(t *testing.T) {
			f := &fakeDB{fail: map[string]error{"rollback": errors.New("write: broken pipe")}}
			txCtx, cancel := context.WithCancel(ctx)
			db, tx := f.begin(t, txCtx, d)
			cancel() // database/sql rolls back, fails, and keeps the connection
			for !slices.Contains(f.log(), "conn1: rollback") {
				time.Sleep(time.Millisecond)
			}
			if err := tx.Rollback(); err == nil {
				t.Fatal("Rollback succeeded although the transaction's own ROLLBACK failed")
			}
			reuse(t, db)
			f.wantAsked(t, slices.Concat(begin, []string{"conn1: rollback", "conn1: close", "conn2: exec SELECT 1"}))
		})

		for _, tc := range []struct {
			name    string
			err     error
			unknown bool // the COMMIT may have committed
		}{
			{"broken connection", errors.New("unexpected EOF"), true},
			{"session terminated", sqlState("57P01"), true},
			{"killed", errors.New("Error 1927 (70100): Connection was killed"), true},
			{"serialization failure", sqlState("40001"), false},
			{"deadlock", errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"), false},
			{"not sent", driver.ErrBadConn, false},
		} {
			t.Run(d.Name()+"/failed commit discards the connection/"+tc.name, func(t *testing.T) {
				f := &fakeDB{fail: map[string]error{"commit": tc.err}}
				db, tx := f.begin(t, ctx, d)
				err := tx.Commit()
				if err == nil || !errors.Is(err, tc.err) {
					t.Fatalf("Commit: %v, want the COMMIT's error", err)
				}
				if got := errors.Is(err, inbox.ErrCommitUnknown); got != tc.unknown {
					t.Errorf("Commit: %v: wraps ErrCommitUnknown %v, want %v", err, got, tc.unknown)
				}
				if !tc.unknown && !strings.Contains(err.Error(), "rolled back") {
					t.Errorf("Commit: %v: want it to say the transaction was rolled back", err)
				}
				reuse(t, db)
				f.wantAsked(t, slices.Concat(begin, []string{"conn1: commit", "conn1: close", "conn2: exec SELECT 1"}))
			})
		}

		t.Run(d.Name()+"/on a pinned connection", func(t *testing.T) {
			f := &fakeDB{}
			db := f.open(t)
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			tx, err := dialect.BeginOn(ctx, d, conn)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, "SELECT 1"); err != nil {
				t.Fatalf("the connection after Commit: %v, want it still the caller's", err)
			}
			f.fail = map[string]error{"rollback": errors.New("write: broken pipe")}
			if tx, err = dialect.BeginOn(ctx, d, conn); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(); err == nil {
				t.Fatal("Rollback succeeded although ROLLBACK failed")
			}
			if _, err := conn.ExecContext(ctx, "SELECT 1"); !errors.Is(err, sql.ErrConnDone) {
				t.Fatalf("the connection after a failed Rollback: %v, want it discarded (sql.ErrConnDone)", err)
			}
		})
	}
}
