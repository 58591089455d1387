package sqlmocktests

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestEnqueueIDsStatements pins EnqueueIDs' statement sequence: on Postgres one INSERT …
// RETURNING per message, on MySQL one INSERT per message whose LastInsertId is the row's id,
// each inside one transaction, the messages' own columns bound after the roles'; a statement
// that fails rolls the transaction back and returns no ids.
func TestEnqueueIDsStatements(t *testing.T) {
	tbl := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload"}
	msgs := []inbox.Message{
		{Payload: []byte("a"), Columns: map[string]any{"account": "acme"}},
		{Payload: []byte("b")},
	}
	for _, tc := range []struct {
		name      string
		d         dialect.Dialect
		first     string
		second    string
		returning bool
	}{
		{"postgres", dialect.Postgres[isolation.Default]{}, `INSERT INTO "jobs" ("payload", "account") VALUES ($1, $2) RETURNING "id"`, `INSERT INTO "jobs" ("payload") VALUES ($1) RETURNING "id"`, true},
		{"mysql", dialect.MySQL[isolation.Default]{}, "INSERT INTO `jobs` (`payload`, `account`) VALUES (?, ?)", "INSERT INTO `jobs` (`payload`) VALUES (?)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, fail := range []bool{false, true} {
				db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
				if err != nil {
					t.Fatal(err)
				}
				mock.ExpectBegin()
				boom := errors.New("boom")
				if tc.returning {
					mock.ExpectQuery(tc.first).WithArgs([]byte("a"), "acme").WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(41)))
					q := mock.ExpectQuery(tc.second).WithArgs([]byte("b"))
					if fail {
						q.WillReturnError(boom)
					} else {
						q.WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(44)))
					}
				} else {
					mock.ExpectExec(tc.first).WithArgs([]byte("a"), "acme").WillReturnResult(sqlmock.NewResult(41, 1))
					e := mock.ExpectExec(tc.second).WithArgs([]byte("b"))
					if fail {
						e.WillReturnError(boom)
					} else {
						e.WillReturnResult(sqlmock.NewResult(44, 1))
					}
				}
				if fail {
					mock.ExpectRollback()
				} else {
					mock.ExpectCommit()
				}
				ids, err := inbox.EnqueueIDs(context.Background(), db, tc.d, tbl, msgs...)
				switch {
				case fail && (!errors.Is(err, boom) || ids != nil):
					t.Errorf("a failed second INSERT: EnqueueIDs = %v, %v; want no ids and the statement's error", ids, err)
				case !fail && (err != nil || !slices.Equal(ids, []int64{41, 44})):
					t.Errorf("EnqueueIDs = %v, %v; want [41 44]", ids, err)
				}
				if err := mock.ExpectationsWereMet(); err != nil {
					t.Error(err)
				}
				db.Close()
			}
		})
	}
}
