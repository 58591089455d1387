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

// TestLeaseGroupsClaimOnMariaDB pins the claim of a table with FIFO groups on MariaDB: Open
// checks the group holds' table before it prepares, then prepares the two takes; a claim is a
// transaction of the pick (which reads each row's group and its hold as the statement saw it),
// a take per group in group order (a plain INSERT where the group had no hold row, whose
// duplicate key on the PRIMARY key means another claim took the group; a compare-and-set UPDATE
// of the hold read, one row changed meaning taken), then the stamp of the rows whose group it
// took, and COMMIT. The row whose take was lost is not claimed; the group of the row claimed is
// released by the row's own release, which writes nothing to the holds.
func TestLeaseGroupsClaimOnMariaDB(t *testing.T) {
	sh := goldenShape("groups")
	fx := newFixture(t, "lease", onMariaDB, sh, 8, inbox.Binding{Name: "q"})
	fx.expectServer()
	fx.expectQuery(fx.sql("group holds' check")).WillReturnRows(sqlmock.NewRows([]string{"table_name", "queue", "group_key", "holder_id", "holder_token"}))
	fx.expectPrepares()
	fx.expectPrepare(fx.sql("group take"))
	fx.expectPrepare(fx.sql("group take of a new hold"))
	f := lease.New(fx.c.d, sh.table, nil)
	fx.opened(t, f)

	fx.expectPrepare(fx.sql("stamp(3)")) // the first claim of three prepares its stamp
	now := time.Now()
	var token driver.Value
	tok := fx.c.token(now.Add(lease.DefaultLease), &token)
	fx.expectBegin()
	pick := sqlmock.NewRows([]string{"id", "payload", "attempt", "queue", "headers", "group_key", "holder_id", "holder_token"}).
		AddRow(int64(11), []byte("p"), int64(0), "q", nil, "g1", int64(7), "2026-01-01 00:00:00.000001").
		AddRow(int64(12), []byte("p"), int64(0), "q", nil, "g0", nil, nil)
	fx.mock.ExpectQuery(fx.sql("claim")).WithArgs(sh.table.Name, "q", sh.table.Name, "q", fx.c.near(now), "q", fx.c.near(now), sh.table.Name, "q", fx.c.near(now), int64(3)).WillReturnRows(pick)
	fx.mock.ExpectExec(fx.sql("group take of a new hold")).WithArgs(sh.table.Name, "q", "g0", int64(12), tok).
		WillReturnError(errors.New("Error 1062 (23000): Duplicate entry 'jobs-q-g0' for key 'PRIMARY'"))
	fx.mock.ExpectExec(fx.sql("group take")).WithArgs(int64(11), sameValue{&token}, sh.table.Name, "q", "g1", int64(7), "2026-01-01 00:00:00.000001").WillReturnResult(changed(1))
	fx.mock.ExpectExec(fx.sql("stamp(3)")).WithArgs(sameValue{&token}, int64(11), int64(11), int64(11)).WillReturnResult(changed(1))
	fx.expectCommit(nil)
	ds := claimed(t, f.Claim, 3)
	if len(ds) != 1 || ds[0].ID != 11 {
		t.Fatalf("claimed %+v, want row 11 alone (row 12's group was taken by another claim)", ds)
	}
	// Close gives the row back: the release clears its lease, which frees its group with it.
	fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(11), sameValue{&token}).WillReturnResult(changed(1))
	fx.closed(t, f)
}
