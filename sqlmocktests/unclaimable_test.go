package sqlmocktests

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
)

// layoutGlob is the GLOB the SQLite searches match the library's time layout with.
const layoutGlob = "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]'"

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
	for _, dc := range []rowlockDialect{rowlockPostgres, rowlockMySQL} {
		t.Run(dc.name, func(t *testing.T) {
			m := newRecorder(t, 1)
			rowlockExpectOpen(m, dc, dc.full)
			f := dc.form(rowlockFullTable)
			plan := rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
			defer f.Close()
			nullGroup := `SELECT "id" FROM "jobs" WHERE "processed_at" IS NULL AND "grp" IS NULL LIMIT 1001`
			far := `SELECT "id" FROM "jobs" WHERE "processed_at" IS NULL AND "grp" = $1 AND "retry_after" > $2 LIMIT 1001`
			if dc.db() != "postgres" {
				nullGroup = strings.ReplaceAll(nullGroup, `"`, "`")
				far = strings.NewReplacer(`"`, "`", "$1", "?", "$2", "?").Replace(far)
			}
			m.mock.ExpectQuery(nullGroup).WithoutArgs().WillReturnRows(idRows(many...))
			m.mock.ExpectQuery(far).WithArgs(rowlockQueue, rowlockTimeNear{time.Now().AddDate(100, 0, 0)}).WillReturnRows(idRows(4, 3))

			found, err := plan.FindUnclaimable(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 2 {
				t.Fatalf("found %+v, want the two kinds", found)
			}
			if g := found[0]; g.Rows != 1000 || !g.More || !slices.Equal(g.IDs, []int64{1000, 1001, 1002, 1003, 1004}) || !strings.Contains(g.Why, `"grp"`) {
				t.Errorf("NULL groups: %+v, want 1000 rows and more, the five smallest ids, and the column named", g)
			}
			if n := found[1]; n.Rows != 2 || n.More || !slices.Equal(n.IDs, []int64{3, 4}) || !strings.Contains(n.Why, "100 years") {
				t.Errorf("never due: %+v, want rows 3 and 4, more than 100 years ahead", n)
			}
		})
	}

	t.Run("sqlite", func(t *testing.T) {
		c := leaseCases[3]
		m := newRecorder(t, 1)
		expectOpen(m, c, c.jobs, "jobs")
		f := lease.New(c.d, leaseJobs, nil)
		plan, err := f.Open(context.Background(), m.db, inbox.Queue{})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		far := "SELECT `id` FROM `jobs` WHERE `retry_after` > ? AND `retry_after` GLOB " + layoutGlob + " LIMIT 1001"
		layout := "SELECT `id` FROM `jobs` WHERE `retry_after` IS NOT NULL AND (typeof(`retry_after`) <> 'text' OR `retry_after` NOT GLOB " + layoutGlob + ") LIMIT 1001"
		m.mock.ExpectQuery(far).WithArgs(leaseTime{want: time.Now().AddDate(100, 0, 0)}).WillReturnRows(idRows())
		m.mock.ExpectQuery(layout).WithoutArgs().WillReturnRows(idRows(8))
		found, err := plan.FindUnclaimable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].Rows != 1 || !slices.Equal(found[0].IDs, []int64{8}) || !strings.Contains(found[0].Why, "layout") {
			t.Errorf("found %+v, want row 8 with a retry_after out of the layout, and no kind with no rows", found)
		}
	})
}
