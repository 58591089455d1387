package sqlmocktests

import (
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
)

// TestAdvisoryGroupsClaim pins the advisory form's claim of a table with FIFO groups, on every
// database with session locks: Open looks for the group holds' table after the catalog (its
// pauses are honoured where it is there) and checks the head's re-check; a claim selects the
// heads of free groups (no read that takes a lock), then, per candidate on its own connection,
// tries the group's lock, then the row's key, re-checks the head, and takes the row. A group
// held elsewhere passes its row over without trying the row's key; a row that is no longer its
// group's head (a settlement moved the group on) is released, both locks in one statement; the
// row taken releases both with its settlement.
func TestAdvisoryGroupsClaim(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			sh := goldenShape("groups")
			fx := newFixture(t, "advisory", c, sh, 2, inbox.Binding{Name: "q"})
			fx.expectServer()
			fx.expectQuery(sqltext.CheckGroups().SQL).WillReturnRows(sqlmock.NewRows([]string{"table_name", "queue", "group_key", "holder_id", "holder_token", "paused_at"}))
			fx.expectPrepares()
			fx.expectPrepare(fx.sql("head"))
			f := c.advisoryForm(sh.table, sh.key)
			fx.opened(t, f)
			if fx.st.has("lockFirst") {
				t.Fatalf("%s: a grouped table's claim has a read that takes a lock", fx.st.path)
			}

			group := func(g string) string { return "inbox:group:jobs:q:" + g }
			lock := func(key string, ok bool) {
				fx.mock.ExpectQuery(fx.sql("lock")).WithArgs(key).WillReturnRows(sqlmock.NewRows([]string{"locked"}).AddRow(fx.c.lockAnswer(ok)))
			}
			fx.mock.ExpectQuery(fx.sql("candidates")).WithArgs(sqlmock.AnyArg(), "q", "jobs", "q", 1+4).WillReturnRows(
				sqlmock.NewRows([]string{"id", "inbox_key", "inbox_group", "inbox_kind", "inbox_limit_key"}).
					AddRow(7, fx.key(7), group("a"), "", "").
					AddRow(8, fx.key(8), group("b"), "", "").
					AddRow(9, fx.key(9), group("c"), "", ""))
			lock(group("a"), false) // held elsewhere: row 7's key is not tried
			lock(group("b"), true)
			lock(fx.key(8), true)
			fx.mock.ExpectQuery(fx.sql("head")).WithArgs(int64(8), "jobs", "q").WillReturnRows(sqlmock.NewRows([]string{"one"}))
			fx.mock.ExpectQuery(fx.unlockMany(2)).WithArgs(group("b"), fx.key(8)).WillReturnRows(sqlmock.NewRows([]string{"n"}).AddRow(2))
			lock(group("c"), true)
			lock(fx.key(9), true)
			fx.mock.ExpectQuery(fx.sql("head")).WithArgs(int64(9), "jobs", "q").WillReturnRows(sqlmock.NewRows([]string{"one"}).AddRow(1))
			fx.expectTake(9, 1, true)
			ds := claimed(t, f.Claim, 1)
			if len(ds) != 1 || ds[0].ID != 9 {
				t.Fatalf("claimed %+v, want row 9 alone", ds)
			}
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(9)).WillReturnResult(changed(1))
			fx.mock.ExpectQuery(fx.unlockMany(2)).WithArgs(group("c"), fx.key(9)).WillReturnRows(sqlmock.NewRows([]string{"n"}).AddRow(2))
			settle(t, f, ds[0], outcome.Ack())
			fx.noWarnings(t)
			fx.closed(t, f)
		})
	}
}
