package sqlmocktests

import (
	"context"
	"errors"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
)

// TestCancelStatements pins Cancel's statement sequence on the databases with row locks, in
// one transaction: a queued row is locked (SKIP LOCKED) and stamped; a row the lock skips is
// read without a lock and, in work, its request recorded; a settled row is reported and left;
// an unknown id is reported and nothing is written for it.
func TestCancelStatements(t *testing.T) {
	sh := goldenShape("cancelled")
	tbl := sh.table
	tbl.LockedUntil = sh.lease
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name, func(t *testing.T) {
			x := goldenSQL(t, "cancel", c.db, sh)
			m := newRecorder(t, 0)
			anyArg := sqlmock.AnyArg()
			m.mock.ExpectBegin()
			// 1: queued.
			m.mock.ExpectQuery(x.of("lock")).WithArgs(int64(1), anyArg).WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(1)))
			m.mock.ExpectExec(x.of("stamp")).WithArgs(anyArg, int64(1), anyArg).WillReturnResult(sqlmock.NewResult(0, 1))
			// 2: in work.
			m.mock.ExpectQuery(x.of("lock")).WithArgs(int64(2), anyArg).WillReturnRows(sqlmock.NewRows([]string{"id"}))
			m.mock.ExpectQuery(x.of("state")).WithArgs(int64(2)).WillReturnRows(sqlmock.NewRows([]string{"state"}).AddRow(0))
			m.mock.ExpectExec(x.of("request")).WithArgs(tbl.Name, int64(2), anyArg).WillReturnResult(sqlmock.NewResult(0, 1))
			// 3: dead.
			m.mock.ExpectQuery(x.of("lock")).WithArgs(int64(3), anyArg).WillReturnRows(sqlmock.NewRows([]string{"id"}))
			m.mock.ExpectQuery(x.of("state")).WithArgs(int64(3)).WillReturnRows(sqlmock.NewRows([]string{"state"}).AddRow(2))
			// 4: unknown.
			m.mock.ExpectQuery(x.of("lock")).WithArgs(int64(4), anyArg).WillReturnRows(sqlmock.NewRows([]string{"id"}))
			m.mock.ExpectQuery(x.of("state")).WithArgs(int64(4)).WillReturnRows(sqlmock.NewRows([]string{"state"}))
			m.mock.ExpectCommit()

			got, err := inbox.Cancel(context.Background(), m.db, c.d, tbl, 1, 2, 3, 4)
			if err != nil {
				t.Fatal(err)
			}
			want := []inbox.CancelOutcome{inbox.Cancelled, inbox.CancelRequested, inbox.AlreadyDead, inbox.NotFound}
			for i, r := range got {
				if r.ID != int64(i+1) || r.Outcome != want[i] {
					t.Errorf("row %d: %v, want %v", i+1, r, want[i])
				}
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCancelWithoutColumn: Cancel on a table without a CancelledAt column is refused with
// ErrSchema before any statement.
func TestCancelWithoutColumn(t *testing.T) {
	m := newRecorder(t, 0)
	_, err := inbox.Cancel(context.Background(), m.db, onPostgres.d, goldenShape("all-roles").table, 1)
	if err == nil || !errors.Is(err, inbox.ErrSchema) {
		t.Fatalf("Cancel = %v, want ErrSchema", err)
	}
	if err := m.mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
