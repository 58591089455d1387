package integration

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

// sessionAt opens b's server, pool of one connection, with every session at level (a system
// variable in the DSN: transaction_isolation where the server has it, tx_isolation on MariaDB
// before 11.1), or at the level b's DSN gives when level is empty.
func (b backend) sessionAt(t *testing.T, level string) *sql.DB {
	t.Helper()
	db := b.open(t, 1)
	if level == "" {
		return db
	}
	variable := "transaction_isolation"
	var v string
	if db.QueryRowContext(context.Background(), "SELECT @@SESSION.transaction_isolation").Scan(&v) != nil {
		variable = "tx_isolation"
	}
	sep := "?"
	if strings.Contains(b.dsn, "?") {
		sep = "&"
	}
	return b.openDSN(t, b.dsn+sep+variable+"=%27"+level+"%27", 1)
}

// runsAt is the isolation level InnoDB runs tx at, as information_schema.innodb_trx names it
// (READ COMMITTED, REPEATABLE READ, …), or "" with the test failed: tx writes a row of table
// first, so that InnoDB has started it. innodb_trx is a cache InnoDB refreshes only when it
// was not read for 100 ms, so a transaction just begun is looked for again after longer pauses.
func runsAt(t *testing.T, tx dialect.Tx, table string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (payload) VALUES ('x')"); err != nil {
		t.Error(err)
		return ""
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var level string
		err := tx.QueryRowContext(ctx, "SELECT trx_isolation_level FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = CONNECTION_ID()").Scan(&level)
		switch {
		case err == nil:
			return level
		case !errors.Is(err, sql.ErrNoRows) || time.Now().After(deadline):
			t.Errorf("reading the transaction's level from innodb_trx: %v", err)
			return ""
		}
	}
}

// statementsSent counts the SET statements (Com_set_option: go-sql-driver/mysql's SET
// TRANSACTION ISOLATION LEVEL) and the transactions begun (Com_begin) on conn's session.
func statementsSent(t *testing.T, conn *sql.Conn) (sets, begins int) {
	t.Helper()
	for _, s := range []struct {
		name string
		n    *int
	}{{"Com_set_option", &sets}, {"Com_begin", &begins}} {
		var name string
		if err := conn.QueryRowContext(context.Background(), "SHOW SESSION STATUS LIKE '"+s.name+"'").Scan(&name, s.n); err != nil {
			t.Fatalf("SHOW SESSION STATUS LIKE '%s': %v", s.name, err)
		}
	}
	return sets, begins
}

// TestSessionLevelOnTheServer: a MySQL or MariaDB transaction runs at its dialect's level
// whatever the session's, and sends SET TRANSACTION ISOLATION LEVEL only where the session runs
// at another: the default (READ COMMITTED) and repeatable read, each on a session at the level
// the backend's DSN gives (the server's REPEATABLE READ here) and on one a DSN puts at READ
// COMMITTED.
func TestSessionLevelOnTheServer(t *testing.T) {
	for _, b := range backends(t, false) {
		if b.name == "postgres" {
			continue
		}
		for _, session := range []string{"", "READ-COMMITTED"} {
			for _, tt := range []struct {
				d    dialect.Dialect
				want string
			}{
				{parsedAt(t, b.name, "default"), "READ COMMITTED"},
				{parsedAt(t, b.name, "repeatable read"), "REPEATABLE READ"},
			} {
				name := b.name + "/" + string(tt.d.Level()) + " on a session at " + session
				if session == "" {
					name = b.name + "/" + string(tt.d.Level()) + " on a session at the DSN's level"
				}
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					db := b.sessionAt(t, session)
					table := tableName(t)
					b.createTable(t, db, minimalTable(table))
					sessionLevel := strings.ReplaceAll(sessionLevelOf(t, db), "-", " ")

					conn, err := db.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					// The transactions that write nothing by text: they do not have the session
					// read again.
					sets0, begins0 := statementsSent(t, conn)
					const n = 5
					for range n {
						tx, err := dialect.BeginOn(ctx, tt.d, conn)
						if err != nil {
							t.Fatal(err)
						}
						if err := tx.Commit(); err != nil {
							t.Fatal(err)
						}
					}
					sets, begins := statementsSent(t, conn)
					wantSets := n
					if sessionLevel == tt.want {
						wantSets = 0
					}
					if sets-sets0 != wantSets || begins-begins0 != n {
						t.Errorf("%d transactions on a session at %s sent %d SET and %d START TRANSACTION, want %d and %d", n, sessionLevel, sets-sets0, begins-begins0, wantSets, n)
					}

					for i := range 2 { // the second after the first's statements by text
						tx, err := dialect.BeginOn(ctx, tt.d, conn)
						if err != nil {
							t.Fatal(err)
						}
						if got := runsAt(t, tx, table); got != tt.want {
							t.Errorf("transaction %d on a session at %s runs at %s, want %s", i+1, sessionLevel, got, tt.want)
						}
						if err := tx.Rollback(); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// TestSessionChangedByAHandler: a statement in a transaction that changes the session's level
// (SET SESSION TRANSACTION ISOLATION LEVEL, as a handler might run in transactional mode) does
// not leave the transactions after it at that level: they run at the dialect's, on a session the
// DSN put at READ COMMITTED, where the library otherwise sends no SET.
func TestSessionChangedByAHandler(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "mysql", "mariadb"), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.sessionAt(t, "READ-COMMITTED")
		table := tableName(t)
		b.createTable(t, db, minimalTable(table))
		d := b.dialect // the default level: READ COMMITTED, the session's
		tx := beginWith(t, ctx, d, db, "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			tx := beginWith(t, ctx, d, db)
			if got := runsAt(t, tx, table); got != "READ COMMITTED" {
				t.Errorf("transaction %d after the session was set SERIALIZABLE runs at %s, want READ COMMITTED", i+1, got)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
		}
		if level := sessionLevelOf(t, db); level != "SERIALIZABLE" {
			t.Errorf("the session is at %s after the transactions, want SERIALIZABLE still: the library sets its transactions' level, not the session's", level)
		}
	})
}

// sessionLevelOf is the level the session of db's one connection runs at: REPEATABLE-READ, ….
func sessionLevelOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	var level string
	if err := db.QueryRowContext(context.Background(), "SELECT @@SESSION.tx_isolation").Scan(&level); err != nil {
		if err := db.QueryRowContext(context.Background(), "SELECT @@SESSION.transaction_isolation").Scan(&level); err != nil {
			t.Fatal(err)
		}
	}
	return level
}

// parsedAt is the dialect of database name at level.
func parsedAt(t *testing.T, name, level string) dialect.Dialect {
	t.Helper()
	d, err := dialect.Parse(name, level)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
