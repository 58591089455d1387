package sqlmocktests

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
)

// idRows answers a search with ids.
func idRows(ids ...int64) *sqlmock.Rows {
	rows := sqlmock.NewRows([]string{"id"})
	for _, id := range ids {
		rows.AddRow(id)
	}
	return rows
}

// TestUnclaimableSearchesAreBoundedReads pins the searches for unclaimable rows: a SELECT of
// ids per kind, of the queue's unprocessed rows, with a LIMIT of 1,001 (a search that hits it
// reports 1,000 rows and more), run outside any transaction. The ids named are the smallest
// five found.
func TestUnclaimableSearchesAreBoundedReads(t *testing.T) {
	many := make([]int64, 1001)
	for i := range many {
		many[i] = int64(2000 - i)
	}
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 1, inbox.Binding{Name: rowlockQueue})
			defer f.Close()
			searches := goldenSQL(t, "unclaimable", c.db, fullShape)
			fx.mock.ExpectQuery(searches.of("null-queue")).WithoutArgs().WillReturnRows(idRows(many...))
			fx.mock.ExpectQuery(searches.of("far-ahead")).WithArgs(rowlockQueue, c.near(time.Now().AddDate(100, 0, 0))).WillReturnRows(idRows(4, 3))

			found, err := fx.plan.FindUnclaimable(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 2 {
				t.Fatalf("found %+v, want the two kinds", found)
			}
			if g := found[0]; g.Rows != 1000 || !g.More || !slices.Equal(g.IDs, []int64{1000, 1001, 1002, 1003, 1004}) || !strings.Contains(g.Why, `"queue"`) {
				t.Errorf("NULL queues: %+v, want 1000 rows and more, the five smallest ids, and the column named", g)
			}
			if n := found[1]; n.Rows != 2 || n.More || !slices.Equal(n.IDs, []int64{3, 4}) || !strings.Contains(n.Why, "100 years") {
				t.Errorf("never due: %+v, want rows 3 and 4, more than 100 years ahead", n)
			}
		})
	}

	t.Run("sqlite", func(t *testing.T) {
		fx, f := openLease(t, onSQLite, fullShape, 1, inbox.Binding{})
		defer f.Close()
		searches := goldenSQL(t, "unclaimable", "sqlite", fullShape)
		fx.mock.ExpectQuery(searches.of("null-queue")).WithoutArgs().WillReturnRows(idRows())
		fx.mock.ExpectQuery(searches.of("far-ahead")).WithArgs("", onSQLite.near(time.Now().AddDate(100, 0, 0))).WillReturnRows(idRows())
		fx.mock.ExpectQuery(searches.of("bad-layout")).WithArgs("").WillReturnRows(idRows(8))
		found, err := fx.plan.FindUnclaimable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].Rows != 1 || !slices.Equal(found[0].IDs, []int64{8}) || !strings.Contains(found[0].Why, "layout") {
			t.Errorf("found %+v, want row 8 with a retry_after out of the layout, and no kind with no rows", found)
		}
	})
}
