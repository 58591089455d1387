package sqlmocktests

import (
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
)

// TestLeaseLimitsClaim pins the claim of a table with concurrency limits on MariaDB and on
// Postgres (which claims a table with limits as MariaDB does, by a pick and a stamp in a
// transaction, rather than in one statement): Open checks the limits' and slots' tables, then
// prepares the slots' three statements; a claim is a transaction of the pick (which reads each
// row's limit key), then, limit by limit in scope and key order, a read of the limit and its
// slots and a take per row while the limit has room (a compare-and-set of a free slot, the
// row's own first; an INSERT of a new slot number, a duplicate of which means another claim
// took it, where the limit has none free); then the stamp of the rows that took a slot of each
// of their limits, and COMMIT. A row that found its kind's limit full is not claimed.
func TestLeaseLimitsClaim(t *testing.T) {
	for _, c := range []dbCase{onMariaDB, onPostgres} {
		t.Run(c.name, func(t *testing.T) { limitsClaim(t, c) })
	}
}

func limitsClaim(t *testing.T, c dbCase) {
	sh := goldenShape("limits")
	fx := newFixture(t, "lease", c, sh, 8, inbox.Binding{Name: "q"})
	side := goldenSQL(t, "limits", c.db, sh)
	fx.expectServer()
	fx.expectQuery(side.of("check")).WillReturnRows(sqlmock.NewRows([]string{"table_name", "queue", "scope", "limit_key", "max_in_work"}))
	fx.expectQuery(side.of("check slots")).WillReturnRows(sqlmock.NewRows([]string{"table_name", "queue", "scope", "limit_key", "slot", "holder_id", "holder_token"}))
	fx.expectPrepares()
	fx.expectPrepare(fx.sql("slots read"))
	fx.expectPrepare(fx.sql("slot take"))
	fx.expectPrepare(fx.sql("slot take of a new slot"))
	f := lease.New(fx.c.d, sh.table, nil)
	fx.opened(t, f)

	fx.expectPrepare(fx.sql("stamp(3)")) // the first claim of three prepares its stamp
	now := time.Now()
	var token driver.Value
	tok := fx.c.token(now.Add(lease.DefaultLease), &token)
	table := sh.table.Name
	fx.expectBegin()
	pick := sqlmock.NewRows([]string{"id", "payload", "attempt", "queue", "kind", "limit_key"}).
		AddRow(int64(11), []byte("p"), int64(0), "q", "a", nil).
		AddRow(int64(12), []byte("p"), int64(0), "q", "a", "k").
		AddRow(int64(13), []byte("p"), int64(0), "q", "b", nil)
	fx.mock.ExpectQuery(fx.sql("claim")).WithArgs(fx.c.near(now), "q", fx.c.near(now), table, "q", fx.c.near(now), int64(3)).WillReturnRows(pick)
	slots := []string{"max_in_work", "slot", "holder_id", "holder_token", "held"}
	read := func(scope, key string, rows *sqlmock.Rows) {
		fx.mock.ExpectQuery(fx.sql("slots read")).WithArgs(fx.c.near(now), table, "q", scope, key).WillReturnRows(rows)
	}
	// Key k: no limit.
	read("key", "k", sqlmock.NewRows(slots))
	// Kind a: 2 at most; slot 0 held by row 7, slot 1 free and naming row 11, which takes it
	// back; row 12 finds no room.
	read("kind", "a", sqlmock.NewRows(slots).
		AddRow(int64(2), int64(0), int64(7), "2026-01-01 00:00:00.000001", int64(1)).
		AddRow(int64(2), int64(1), int64(11), "2026-01-01 00:00:00.000002", int64(0)))
	fx.mock.ExpectExec(fx.sql("slot take")).WithArgs(int64(11), tok, table, "q", "kind", "a", int64(1), int64(11), "2026-01-01 00:00:00.000002").WillReturnResult(changed(1))
	// Kind b: no limit.
	read("kind", "b", sqlmock.NewRows(slots))
	// The queue: 3 at most, no slot yet; slot 0 was inserted by another claim since.
	read("queue", "", sqlmock.NewRows(slots).AddRow(int64(3), nil, nil, nil, int64(0)))
	newSlot := fx.mock.ExpectExec(fx.sql("slot take of a new slot")).WithArgs(table, "q", "queue", "", int64(0), int64(11), sameValue{&token})
	if c.db == "postgres" {
		newSlot.WillReturnResult(changed(0)) // ON CONFLICT DO NOTHING
	} else {
		newSlot.WillReturnError(errors.New("Error 1062 (23000): Duplicate entry 'jobs-q-queue--0' for key 'PRIMARY'"))
	}
	fx.mock.ExpectExec(fx.sql("slot take of a new slot")).WithArgs(table, "q", "queue", "", int64(1), int64(11), sameValue{&token}).WillReturnResult(changed(1))
	fx.mock.ExpectExec(fx.sql("slot take of a new slot")).WithArgs(table, "q", "queue", "", int64(2), int64(13), sameValue{&token}).WillReturnResult(changed(1))
	fx.mock.ExpectExec(fx.sql("stamp(3)")).WithArgs(sameValue{&token}, int64(11), int64(13), int64(13)).WillReturnResult(changed(2))
	fx.expectCommit(nil)
	ds := claimed(t, f.Claim, 3)
	if len(ds) != 2 || ds[0].ID != 11 || ds[1].ID != 13 {
		t.Fatalf("claimed %+v, want rows 11 and 13 (row 12's kind is at its limit)", ds)
	}
	// Close gives the rows back: each release clears the row's lease, which frees its slots.
	fx.mock.MatchExpectationsInOrder(false)
	fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(11), sameValue{&token}).WillReturnResult(changed(1))
	fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(13), sameValue{&token}).WillReturnResult(changed(1))
	fx.closed(t, f)
}
