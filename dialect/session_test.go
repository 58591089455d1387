package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

const (
	askMySQL   = "query SELECT @@SESSION.transaction_isolation"
	askMariaDB = "query SELECT @@SESSION.tx_isolation"
)

// unknownVariable is the server's answer to a variable it does not have.
var unknownVariable = errors.New("Error 1193 (HY000): Unknown system variable 'transaction_isolation'")

// asks is what a new connection of d is asked before its first transaction on a server that
// answers no session level: the first of Caps.SessionLevelQueries, on MySQL and MariaDB.
func asks(d dialect.Dialect, conn string) []string {
	if qs := d.Caps().SessionLevelQueries; len(qs) > 0 {
		return []string{conn + ": query " + qs[0]}
	}
	return nil
}

// TestSessionLevel pins the statements a MySQL or MariaDB transaction begins with: the session's
// level is asked on the connection's first transaction, and a transaction at that level begins
// with START TRANSACTION alone (database/sql's Default), one at another sets its level (SET
// TRANSACTION ISOLATION LEVEL, as go-sql-driver/mysql sends for a level in sql.TxOptions).
func TestSessionLevel(t *testing.T) {
	var (
		mysql       = dialect.MySQL[isolation.Default]{}
		mariadb     = dialect.MariaDB[isolation.Default]{}
		mariadbRR   = dialect.MariaDB[isolation.RepeatableRead]{}
		mariadbRC   = dialect.MariaDB[isolation.ReadCommitted]{}
		mariadbSer  = dialect.MariaDB[isolation.Serializable]{}
		readCommit  = map[string]string{"SELECT @@SESSION.tx_isolation": "READ-COMMITTED"}
		repeatRead  = map[string]string{"SELECT @@SESSION.tx_isolation": "REPEATABLE-READ"}
		mysql8      = map[string]string{"SELECT @@SESSION.transaction_isolation": "READ-COMMITTED"}
		mariadb1011 = map[string]error{"SELECT @@SESSION.transaction_isolation": unknownVariable}
	)
	for _, tt := range []struct {
		name    string
		answers map[string]string
		fail    map[string]error
		begins  []dialect.Dialect // one after the other, on the pool's one connection
		want    []string
	}{
		{
			"the default at a READ COMMITTED session", readCommit, nil,
			[]dialect.Dialect{mariadb, mariadb, mariadbRC},
			[]string{askMariaDB, "begin at Default", "commit", "begin at Default", "commit", "begin at Default", "commit"},
		},
		{
			"the default at a REPEATABLE READ session, asked once", repeatRead, nil,
			[]dialect.Dialect{mariadb, mariadb},
			[]string{askMariaDB, "begin at Read Committed", "commit", "begin at Read Committed", "commit"},
		},
		{
			"repeatable read at a REPEATABLE READ session", repeatRead, nil,
			[]dialect.Dialect{mariadbRR, mariadb, mariadbRR, mariadbSer},
			[]string{askMariaDB, "begin at Default", "commit", "begin at Read Committed", "commit", "begin at Default", "commit", "begin at Serializable", "commit"},
		},
		{
			"the MySQL dialect on MySQL 8", mysql8, nil,
			[]dialect.Dialect{mysql, mysql},
			[]string{askMySQL, "begin at Default", "commit", "begin at Default", "commit"},
		},
		{
			"the MySQL dialect on MariaDB before 11.1, which has no transaction_isolation", readCommit, mariadb1011,
			[]dialect.Dialect{mysql, mysql},
			[]string{askMySQL, askMariaDB, "begin at Default", "commit", "begin at Default", "commit"},
		},
		{
			"a server that names no level the library knows", map[string]string{"SELECT @@SESSION.tx_isolation": "SNAPSHOT"}, nil,
			[]dialect.Dialect{mariadb, mariadbRR},
			[]string{askMariaDB, "begin at Read Committed", "commit", "begin at Repeatable Read", "commit"},
		},
		{
			"a server that answers neither variable", nil, map[string]error{"SELECT @@SESSION.tx_isolation": errors.New("Error 1227 (42000): Access denied"), "SELECT @@SESSION.transaction_isolation": unknownVariable},
			[]dialect.Dialect{mysql, mysql},
			[]string{askMySQL, askMariaDB, "begin at Read Committed", "commit", "begin at Read Committed", "commit"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDB{answers: tt.answers, fail: tt.fail}
			db := f.open(t)
			for _, d := range tt.begins {
				tx, err := d.Begin(context.Background(), db)
				if err != nil {
					t.Fatalf("%s at %s: Begin: %v", d.Name(), d.Level(), err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatalf("Commit: %v", err)
				}
			}
			f.wantAsked(t, on("conn1", tt.want...))
		})
	}
}

// TestSessionChangedInATransaction: a statement by text in a transaction (a handler's, in
// transactional mode) may change the session's level for the transactions after it, by SET
// SESSION TRANSACTION ISOLATION LEVEL or a stored function that sets tx_isolation, so the next
// transaction asks again rather than begin at the level it read before; a statement prepared
// on the pool (the forms' own) leaves what was read standing.
func TestSessionChangedInATransaction(t *testing.T) {
	ctx := context.Background()
	const setSerializable = "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"
	for _, tt := range []struct {
		name string
		run  func(dialect.Tx) error
		want string // what the run sends
	}{
		{"ExecContext", func(tx dialect.Tx) error {
			_, err := tx.ExecContext(ctx, setSerializable)
			return err
		}, "exec " + setSerializable},
		{"QueryContext", func(tx dialect.Tx) error {
			rows, err := tx.QueryContext(ctx, "SELECT set_serializable()")
			if err == nil {
				rows.Close()
			}
			return err
		}, "query SELECT set_serializable()"},
		{"QueryRowContext", func(tx dialect.Tx) error {
			var v string
			return tx.QueryRowContext(ctx, "SELECT set_serializable()").Scan(&v)
		}, "query SELECT set_serializable()"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDB{answers: map[string]string{"SELECT @@SESSION.tx_isolation": "READ-COMMITTED", "SELECT set_serializable()": "1"}}
			db := f.open(t)
			d := dialect.MariaDB[isolation.Default]{}
			tx, err := d.Begin(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.run(tx); err != nil {
				t.Fatal(err)
			}
			f.answers["SELECT @@SESSION.tx_isolation"] = "SERIALIZABLE" // what the statement did
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if tx, err = d.Begin(ctx, db); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			want := on("conn1", askMariaDB, "begin at Default", tt.want, "commit",
				askMariaDB, "begin at Read Committed", "commit", // asked again: the SET is back
				"begin at Read Committed", "commit") // a session at another level is not asked again
			f.wantAsked(t, want)
		})
	}

	t.Run("the lease form's claim level beside the MariaDB dialect", func(t *testing.T) {
		f := &fakeDB{
			answers: map[string]string{"SELECT @@SESSION.tx_isolation": "READ-COMMITTED"},
			fail:    map[string]error{"SELECT @@SESSION.transaction_isolation": unknownVariable},
		}
		db := f.open(t)
		tx, err := dialect.MariaDB[isolation.Default]{}.Begin(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, setSerializable); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if tx, err = (dialect.MySQL[isolation.ReadCommitted]{}).Begin(ctx, db); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		// Asked again by the variable the server answered, not by the MySQL dialect's first.
		want := on("conn1", askMariaDB, "begin at Default", "exec "+setSerializable, "commit", askMariaDB, "begin at Default", "commit")
		f.wantAsked(t, want)
	})

	t.Run("prepared statements", func(t *testing.T) {
		const ack = "DELETE FROM jobs WHERE id = ?"
		f := &fakeDB{answers: map[string]string{"SELECT @@SESSION.tx_isolation": "READ-COMMITTED"}}
		db := f.open(t)
		stmt, err := db.PrepareContext(ctx, ack)
		if err != nil {
			t.Fatal(err)
		}
		defer stmt.Close()
		d := dialect.MariaDB[isolation.Default]{}
		for range 2 {
			tx, err := d.Begin(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, 7); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		want := on("conn1", "prepare "+ack, askMariaDB,
			"begin at Default", "stmt exec "+ack, "commit",
			"begin at Default", "stmt exec "+ack, "commit")
		f.wantAsked(t, want)
	})
}

// TestSessionOnAPinnedConnection: BeginOn, on a connection the caller keeps (the advisory
// form's), reads the session once for all its transactions.
func TestSessionOnAPinnedConnection(t *testing.T) {
	ctx := context.Background()
	f := &fakeDB{answers: map[string]string{"SELECT @@SESSION.tx_isolation": "READ-COMMITTED"}}
	conn, err := f.open(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 2 {
		tx, err := dialect.BeginOn(ctx, dialect.MariaDB[isolation.Default]{}, conn)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	f.wantAsked(t, on("conn1", askMariaDB, "begin at Default", "rollback", "begin at Default", "rollback"))
}

// TestSessionsForgottenWithTheirConnections: what is known of a session goes when its driver
// connection is closed and collected; it does not keep the connection alive.
func TestSessionsForgottenWithTheirConnections(t *testing.T) {
	ctx := context.Background()
	before := dialect.RememberedSessions()
	func() {
		db := sql.OpenDB(&fakeDB{answers: map[string]string{"SELECT @@SESSION.tx_isolation": "READ-COMMITTED"}})
		defer db.Close()
		var txs []dialect.Tx
		for range 3 { // three transactions at once: three connections
			tx, err := dialect.MariaDB[isolation.Default]{}.Begin(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			txs = append(txs, tx)
		}
		if n := dialect.RememberedSessions(); n < before+3 {
			t.Errorf("%d sessions remembered with three connections open, want at least %d", n, before+3)
		}
		for _, tx := range txs {
			tx.Commit()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for dialect.RememberedSessions() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions remembered after their connections were closed, want at most %d", dialect.RememberedSessions(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// on prefixes each event with its connection, as fakeDB logs it.
func on(conn string, events ...string) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = conn + ": " + e
	}
	return out
}
