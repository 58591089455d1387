package integration

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
)

// createdTable describes a table with every role, the publishing time (CreatedAt) among them.
func createdTable(name string) inbox.Table {
	tbl := deadTable(name)
	tbl.CreatedAt = "created_at"
	return tbl
}

// TestCreatedAtStampedAtPublishDatesTheOldestDueRow: publishing stamps created_at with the
// host's clock, and Stats' OldestDue counts a row never delayed from it, where without the
// role it could only say Unknown; a row whose created_at the application left NULL is unknown
// still.
func TestCreatedAtStampedAtPublishDatesTheOldestDueRow(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := createdTable(tableName(t))
		a := createAdminTable(t, b, db, tbl)
		check, err := a.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !check.OK() {
			t.Fatalf("the table admin.Schema created does not pass its check: %+v", check)
		}

		before := time.Now().Add(-time.Millisecond)
		b.enqueue(t, db, tbl, inbox.Message{Queue: "fresh", Payload: []byte(`{}`)})
		after := time.Now().Add(time.Millisecond)
		var stamped any
		if err := db.QueryRow("SELECT " + b.q(t, "created_at") + " FROM " + b.q(t, tbl.Name)).Scan(&stamped); err != nil {
			t.Fatal(err)
		}
		at, err := dialect.ScannedTime(stamped)
		if err != nil {
			t.Fatalf("created_at %v: %v", stamped, err)
		}
		if at.Before(before) || at.After(after) {
			t.Errorf("created_at %v, want the publish's time, between %v and %v", at, before, after)
		}

		insert := "INSERT INTO " + b.q(t, tbl.Name) + " (" + b.q(t, "grp") + ", " + b.q(t, "created_at") + ") VALUES (" + b.placeholders(2) + ")"
		mustExec(t, db, insert, "old", b.dialect.Time(time.Now().Add(-10*time.Minute)))
		mustExec(t, db, insert, "undated", nil)

		stats, err := a.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byQueue := map[string]admin.Stats{}
		for _, s := range stats {
			byQueue[s.Queue] = s
		}
		if got := byQueue["fresh"].OldestDue; got < 0 || got > time.Minute {
			t.Errorf("queue fresh: oldest due %v, want the few moments since its publish", got)
		}
		if got := byQueue["old"].OldestDue; got < 10*time.Minute || got > 11*time.Minute {
			t.Errorf("queue old: oldest due %v, want 10 minutes (its created_at)", got)
		}
		if got := byQueue["undated"].OldestDue; got != admin.Unknown {
			t.Errorf("queue undated: oldest due %v, want Unknown (no created_at, never delayed)", got)
		}
	})
}

// createAdminTable creates tbl (anew) from admin.Schema's statements, with the lease column
// locked_until, dropped when the test ends, and returns its admin.Admin.
func createAdminTable(t *testing.T, b backend, db *sql.DB, tbl inbox.Table) *admin.Admin {
	t.Helper()
	tbl.LockedUntil = "locked_until"
	stmts, err := admin.Schema(b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	drop := "DROP TABLE IF EXISTS " + b.q(t, tbl.Name)
	mustExec(t, db, drop)
	t.Cleanup(func() { db.Exec(drop) })
	for _, s := range stmts {
		mustExec(t, db, s)
	}
	a, err := admin.New(db, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
