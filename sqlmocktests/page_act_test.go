package sqlmocktests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox/admin"
)

// TestPageActStatements pins admin.Act's statements over a chunk of ids: a plain read of the
// ids the action takes; then, on a database with row locks, a transaction that locks those no
// one holds (SKIP LOCKED) and changes them, by one id list on Postgres and one id at a time on
// MySQL (whose id list InnoDB may read by a scan that waits for the rows consumers hold); on
// SQLite one change that passes over the leased rows. The rows it takes but does not change
// are in work. A change that fails rolls its transaction back.
func TestPageActStatements(t *testing.T) {
	idRows := func(m *recorder, ids ...int64) *sqlmock.Rows {
		rows := m.mock.NewRows([]string{"id"})
		for _, id := range ids {
			rows.AddRow(id)
		}
		return rows
	}
	for _, c := range []dbCase{onPostgres, onMySQL, onSQLite} {
		for _, fail := range []bool{false, true} {
			name := c.name
			if fail {
				name += "/failed change"
			}
			t.Run(name, func(t *testing.T) {
				m := newRecorder(t, 0)
				sql := goldenSQL(t, "admin", c.db, fullShape)
				now := c.near(time.Now())
				m.mock.ExpectQuery(sql.of("eligible(delete, 3)")).WithArgs(int64(1), int64(2), int64(3)).WillReturnRows(idRows(m, 1, 2, 3))
				boom := errors.New("boom")
				want := admin.Result{Changed: 2, InWork: 1}
				switch {
				case c.d.Caps().OneWriter:
					e := m.mock.ExpectExec(sql.of("change(delete, 3)")).WithArgs(int64(1), int64(2), int64(3), now)
					if fail {
						e.WillReturnError(boom)
					} else {
						e.WillReturnResult(changed(2))
					}
				case c.d.Caps().IDListSettles:
					m.mock.ExpectBegin()
					m.mock.ExpectQuery(sql.of("lock(delete, 3)")).WithArgs(int64(1), int64(2), int64(3), now).WillReturnRows(idRows(m, 1, 2, 3))
					e := m.mock.ExpectExec(sql.of("change(delete, 3)")).WithArgs(int64(1), int64(2), int64(3), now)
					if fail {
						e.WillReturnError(boom)
						m.mock.ExpectRollback()
					} else {
						e.WillReturnResult(changed(3))
						m.mock.ExpectCommit()
						want = admin.Result{Changed: 3}
					}
				default:
					m.mock.ExpectBegin()
					m.mock.ExpectQuery(sql.of("lock(delete, 3)")).WithArgs(int64(1), int64(2), int64(3), now).WillReturnRows(idRows(m, 1, 3))
					m.mock.ExpectExec(sql.of("change(delete, 1)")).WithArgs(int64(1), now).WillReturnResult(changed(1))
					e := m.mock.ExpectExec(sql.of("change(delete, 1)")).WithArgs(int64(3), now)
					if fail {
						e.WillReturnError(boom)
						m.mock.ExpectRollback()
					} else {
						e.WillReturnResult(changed(1))
						m.mock.ExpectCommit()
					}
				}
				tbl := fullShape.table
				tbl.LockedUntil = fullShape.lease
				a, err := admin.New(m.db, c.d, tbl)
				if err != nil {
					t.Fatal(err)
				}
				r, err := a.Act(context.Background(), admin.Delete, admin.IDs(1, 2, 3))
				switch {
				case fail && (!errors.Is(err, boom) || r.Changed != 0):
					t.Errorf("Act with a failed change = %+v, %v; want nothing changed and the change's error", r, err)
				case !fail && (err != nil || r != want):
					t.Errorf("Act = %+v, %v; want %+v", r, err, want)
				}
				if err := m.mock.ExpectationsWereMet(); err != nil {
					t.Error(err)
				}
			})
		}
	}
}
