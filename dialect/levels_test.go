package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestLevelMapping pins what each typed dialect declares and how its Begin opens the
// transaction: the isolation level database/sql hands the driver (Default means a plain BEGIN),
// or on SQLite the BEGIN statement issued on the pinned connection.
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
			if got := tt.d.Level(); got != tt.level {
				t.Errorf("Level() = %q, want %q", got, tt.level)
			}
			f := &fakeDB{}
			tx, err := tt.d.Begin(context.Background(), f.open(t))
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			end := "rollback"
			if tt.name == "sqlite" {
				end = "exec ROLLBACK"
			}
			if want := []string{"conn1: " + tt.begin, "conn1: " + end}; !slices.Equal(f.log(), want) {
				t.Errorf("the connection was asked %q, want %q", f.log(), want)
			}
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
		db := f.open(t)
		tx, err := d.Begin(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		reuse(t, db)
		want := []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec COMMIT", "conn1: exec SELECT 1"}
		if got := f.log(); !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
	})

	t.Run("failed commit rolls back", func(t *testing.T) {
		f := &fakeDB{fail: map[string]error{"COMMIT": busy}}
		db := f.open(t)
		tx, err := d.Begin(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); !errors.Is(err, busy) {
			t.Fatalf("Commit: %v, want the COMMIT's error", err)
		}
		reuse(t, db)
		want := []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec COMMIT", "conn1: exec ROLLBACK", "conn1: exec SELECT 1"}
		if got := f.log(); !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
	})

	t.Run("failed rollback discards the connection", func(t *testing.T) {
		f := &fakeDB{fail: map[string]error{"ROLLBACK": errors.New("disk I/O error")}}
		db := f.open(t)
		tx, err := d.Begin(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err == nil {
			t.Fatal("Rollback succeeded although ROLLBACK failed")
		}
		reuse(t, db)
		want := []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec ROLLBACK", "conn1: close", "conn2: exec SELECT 1"}
		if got := f.log(); !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
	})

	t.Run("failed begin", func(t *testing.T) {
		f := &fakeDB{fail: map[string]error{"BEGIN IMMEDIATE": busy}}
		db := f.open(t)
		if _, err := d.Begin(ctx, db); !errors.Is(err, busy) {
			t.Fatalf("Begin: %v, want the BEGIN's error", err)
		}
		reuse(t, db)
		want := []string{"conn1: exec BEGIN IMMEDIATE", "conn1: exec SELECT 1"}
		if got := f.log(); !slices.Equal(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}
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
