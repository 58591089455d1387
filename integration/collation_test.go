package integration

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/lease"
)

// Keys compare exactly (issue 24): on every database a consumer of kinds alpha and beta in queue
// Billing, on a table admin.Schema (inbox schema) created, never claims a row of kind "Alpha" or
// "beta " nor one of queue "billing" or "Billing ", and unique keys "K", "k" and "K " are three
// keys. On MySQL and MariaDB, whose default collations ignore case and trailing spaces, a table
// created with the default collation claims those rows, which its check flags, naming each key
// column and the ALTER TABLE that fixes it, and Open warns of; after the fixes the check passes
// and the consumer claims its own rows alone.

// keyRow is a row of the collation tests: its queue, kind and unique key.
type keyRow struct{ queue, kind, key string }

// keyRows are the rows each collation test writes; the first two are the consumer's own.
var keyRows = []keyRow{
	{"Billing", "alpha", "K"}, {"Billing", "beta", "k"}, // the consumer's
	{"Billing", "Alpha", "K "}, {"Billing", "beta ", "k "}, {"Billing", "ALPHA", "kk"}, // kinds it does not run
	{"billing", "alpha", "a"}, {"Billing ", "beta", "b"}, // queues it does not claim from
}

// keyTable describes the collation tests' table: kinds, a unique key and the lease column.
func keyTable(name string) inbox.Table {
	tbl := kindTable(name)
	tbl.UniqueKey, tbl.LockedUntil = "unique_key", "locked_until"
	return tbl
}

func TestKeysCompareExactly(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := keyTable(tableName(t))
		a := createAdminTable(t, b, db, tbl)
		if c, err := a.Check(ctx); err != nil || !c.OK() {
			t.Fatalf("the table admin.Schema created does not pass its check: %+v, %v", c, err)
		}
		ids := insertKeyRows(t, b, db, tbl, true)
		var log bytes.Buffer
		if got := claimKeyRows(t, b, db, tbl, &log); !slices.Equal(got, ids[:2]) {
			t.Errorf("the consumer of kinds alpha and beta in queue Billing claimed rows %v, want %v alone (rows %+v)", got, ids[:2], keyRows)
		}
		if strings.Contains(log.String(), "inexactly") {
			t.Errorf("Open warned of a table admin.Schema created: %s", log.String())
		}
	})
}

func TestCheckFlagsKeyColumnsOfTheDefaultCollation(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "mysql", "mariadb"), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := keyTable(tableName(t))
		stmts, err := admin.Schema(b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		drop := "DROP TABLE IF EXISTS " + b.q(t, tbl.Name)
		mustExec(t, db, drop)
		t.Cleanup(func() { db.Exec(drop) })
		for _, s := range stmts {
			// The table as inbox schema created it before: VARCHAR(191) of the default collation.
			s = strings.ReplaceAll(s, " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin", "")
			mustExec(t, db, strings.ReplaceAll(s, "VARBINARY(764)", "VARCHAR(191)"))
		}
		a, err := admin.New(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var fixes []string
		flagged := map[string]bool{}
		for _, col := range c.Columns {
			if col.OK() {
				continue
			}
			flagged[col.Column] = true
			if !strings.Contains(col.Fix, "ALTER TABLE "+b.q(t, tbl.Name)+" MODIFY "+b.q(t, col.Column)) || !strings.Contains(col.String(), "collation") {
				t.Errorf("column %s: %q, fix %q: want the collation named and an ALTER TABLE of the column", col.Column, col, col.Fix)
			}
			fixes = append(fixes, col.Fix)
		}
		if c.OK() || len(flagged) != 3 || !flagged[tbl.Queue] || !flagged[tbl.Kind] || !flagged[tbl.UniqueKey] {
			t.Fatalf("the check of a table of the default collation flagged %v (OK %v), want the queue, kind and unique key columns", flagged, c.OK())
		}
		// The defect the check names: keys "K" and "k " collide, and the consumer claims rows of
		// kinds and queues it does not run.
		insert := "INSERT INTO " + b.q(t, tbl.Name) + " (" + b.q(t, tbl.UniqueKey) + ") VALUES (" + b.placeholders(1) + ")"
		mustExec(t, db, insert, "K")
		if _, err := db.ExecContext(ctx, insert, "k "); err == nil {
			t.Errorf("on the default collation unique keys \"K\" and \"k \" did not collide: the test no longer shows the defect")
		}
		mustExec(t, db, "DELETE FROM "+b.q(t, tbl.Name))
		ids := insertKeyRows(t, b, db, tbl, false)
		var log bytes.Buffer
		if got := claimKeyRows(t, b, db, tbl, &log); len(got) <= 2 {
			t.Errorf("on the default collation the consumer claimed rows %v: the test no longer shows the defect", got)
		}
		for _, col := range []string{tbl.Queue, tbl.Kind, tbl.UniqueKey} {
			if !strings.Contains(log.String(), "inexactly") || !strings.Contains(log.String(), "column="+col) {
				t.Errorf("Open's log does not warn of column %s: %s", col, log.String())
			}
		}
		mustExec(t, db, "DELETE FROM "+b.q(t, tbl.Name))
		for _, fix := range fixes {
			mustExec(t, db, fix)
		}
		if c, err := a.Check(ctx); err != nil || !c.OK() {
			t.Fatalf("after the fixes %v the check still fails: %+v, %v", fixes, c, err)
		}
		ids = insertKeyRows(t, b, db, tbl, true)
		if got := claimKeyRows(t, b, db, tbl, &log); !slices.Equal(got, ids[:2]) {
			t.Errorf("after the fixes the consumer claimed rows %v, want %v alone", got, ids[:2])
		}
	})
}

// insertKeyRows writes keyRows into tbl, each with its unique key where keys says so (a key that
// compared equal to another would fail the INSERT on the unique index; elsewhere NULL), and
// returns their ids in order.
func insertKeyRows(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, keys bool) []int64 {
	t.Helper()
	q := func(ident string) string { return b.q(t, ident) }
	insert := "INSERT INTO " + q(tbl.Name) + " (" + q(tbl.Queue) + ", " + q(tbl.Kind) + ", " + q(tbl.UniqueKey) + ") VALUES (" + b.placeholders(3) + ")"
	var ids []int64
	for _, r := range keyRows {
		var key any
		if keys {
			key = r.key
		}
		mustExec(t, db, insert, r.queue, r.kind, key)
		ids = append(ids, int64(count(t, db, "SELECT MAX("+q(tbl.ID)+") FROM "+q(tbl.Name))))
	}
	return ids
}

// claimKeyRows opens the lease form on tbl for kinds alpha and beta in queue Billing, its
// warnings written to log, claims all it can and returns the ids claimed, in order.
func claimKeyRows(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, log *bytes.Buffer) []int64 {
	t.Helper()
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
	f := openForm(t, lease.New(b.dialect, tbl, nil), db, inbox.Binding{
		Name: "Billing", Logger: logger, Kinds: []inbox.ClaimedKind{{Kind: "alpha"}, {Kind: "beta"}},
	})
	return sortedIDs(claim(t, f, len(keyRows)))
}
