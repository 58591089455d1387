package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
)

// TestOwnColumnsRefuseRolesByCase: Message.Columns cannot set a column the library reads and
// writes by its role, under any case on the databases whose column names ignore case (MySQL
// and MariaDB, under both dialects, and SQLite), the lease form's column (Table.LockedUntil)
// included: the publish fails, naming the role, and publishes nothing. On Postgres a name of
// another case is another column, which the table does not have: the database refuses it.
func TestOwnColumnsRefuseRolesByCase(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 4, deadTable)
		tbl.LockedUntil = "locked_until"
		folds := b.name != "postgres"
		future := time.Now().Add(time.Hour).UTC()
		for _, tc := range []struct {
			column string
			value  any
			role   string // the role the library names; empty where the database refuses instead
		}{
			{"ATTEMPT", 99, "Attempt"},
			{"Attempt", 99, "Attempt"},
			{"Dead_At", b.dialect.Time(future), "DeadAt"},
			{"RETRY_AFTER", b.dialect.Time(future), "RetryAfter"},
			{"Id", 12345, "ID"},
			{"locked_until", b.dialect.Time(future), "LockedUntil"},
			{"Locked_Until", b.dialect.Time(future), "LockedUntil"},
		} {
			t.Run(tc.column, func(t *testing.T) {
				if !folds && tc.column != "locked_until" {
					tc.role = ""
				}
				m := inbox.Message{Queue: "q", Payload: []byte("x"), Columns: map[string]any{tc.column: tc.value}}
				err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, m)
				switch {
				case err == nil:
					t.Errorf("Columns {%q: %v} published", tc.column, tc.value)
				case tc.role != "" && (!errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), tc.role)):
					t.Errorf("Columns {%q}: %v; want an ErrSchema naming the %s column", tc.column, err, tc.role)
				}
				if n := b.countRows(t, db, tbl, ""); n != 0 {
					t.Errorf("Columns {%q}: %d rows published, want none", tc.column, n)
					mustExec(t, db, "DELETE FROM "+b.q(t, tbl.Name))
				}
			})
		}
		// An own column of the application's is still published.
		if _, err := db.Exec("ALTER TABLE " + b.q(t, tbl.Name) + " ADD COLUMN account VARCHAR(64)"); err != nil {
			t.Fatal(err)
		}
		account := "account"
		if folds {
			account = "Account" // another case of a column no role names: the same column, published
		}
		b.enqueue(t, db, tbl, inbox.Message{Queue: "q", Columns: map[string]any{account: "acme"}})
		if n := b.countRows(t, db, tbl, "account = 'acme'"); n != 1 {
			t.Errorf("%d rows published with their own column, want 1", n)
		}
	})
}
