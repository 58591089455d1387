package sqlmocktests

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
)

// TestEnqueueIDsStatements pins EnqueueIDs' statement sequence: on Postgres one INSERT …
// RETURNING per message, on MySQL one INSERT per message whose LastInsertId is the row's id,
// each inside one transaction, the messages' own columns bound after the roles'; a statement
// that fails rolls the transaction back and returns no ids. The first message sets the own
// columns of the golden shape that has them; the second sets none, and is written as the
// no-attempt shape's, which publishes the same roles and has no own columns.
func TestEnqueueIDsStatements(t *testing.T) {
	ownShape := goldenShape("own-columns")
	msgs := []inbox.Message{
		{Payload: []byte("a"), Columns: map[string]any{"account": "acme", "region": "eu"}},
		{Payload: []byte("b")},
	}
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name, func(t *testing.T) {
			first := goldenSQL(t, "publish", c.db, ownShape).of("insertID")
			second := goldenSQL(t, "publish", c.db, goldenShape("no-attempt")).of("insertID")
			returning := c.db == "postgres"
			for _, fail := range []bool{false, true} {
				m := newRecorder(t, 0)
				m.mock.ExpectBegin()
				boom := errors.New("boom")
				if returning {
					m.mock.ExpectQuery(first).WithArgs([]byte("a"), "", 0, nil, nil, "acme", "eu").WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(41)))
					q := m.mock.ExpectQuery(second).WithArgs([]byte("b"), "", 0, nil, nil)
					if fail {
						q.WillReturnError(boom)
					} else {
						q.WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(44)))
					}
				} else {
					m.mock.ExpectExec(first).WithArgs([]byte("a"), "", 0, nil, nil, "acme", "eu").WillReturnResult(sqlmock.NewResult(41, 1))
					e := m.mock.ExpectExec(second).WithArgs([]byte("b"), "", 0, nil, nil)
					if fail {
						e.WillReturnError(boom)
					} else {
						e.WillReturnResult(sqlmock.NewResult(44, 1))
					}
				}
				if fail {
					m.mock.ExpectRollback()
				} else {
					m.mock.ExpectCommit()
				}
				ids, err := inbox.EnqueueIDs(context.Background(), m.db, c.d, ownShape.table, msgs...)
				switch {
				case fail && (!errors.Is(err, boom) || ids != nil):
					t.Errorf("a failed second INSERT: EnqueueIDs = %v, %v; want no ids and the statement's error", ids, err)
				case !fail && (err != nil || !slices.Equal(ids, []int64{41, 44})):
					t.Errorf("EnqueueIDs = %v, %v; want [41 44]", ids, err)
				}
				if err := m.mock.ExpectationsWereMet(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
