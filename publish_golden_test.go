package inbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"testing"

	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// TestGoldenStatements pins the INSERT that publishing builds today, of one row and of three,
// for each golden table shape on each database, in internal/sqltext/testdata/publish: with
// -update it writes the files, otherwise it checks that publishing still builds what they hold.
// The files are what internal/sqltext's builders are proven against. This test goes when
// publishing takes its statement from internal/sqltext.
func TestGoldenStatements(t *testing.T) {
	for _, dl := range golden.Dialects {
		for _, sh := range golden.Shapes {
			var e []golden.Entry
			tbl := Table(sh.Table)
			for _, n := range []int{1, 3, -1, -3} { // negative: n rows, notifying (Postgres)
				name := fmt.Sprintf("insert(%d)", n)
				if n < 0 {
					if dl.Name != "postgres" {
						continue
					}
					n, tbl.Notify, name = -n, true, fmt.Sprintf("insert(%d) notifying", -n)
				}
				msgs := make([]Message, n)
				for i := range msgs {
					msgs[i].ID = int64(i + 1)
				}
				var rec insertRecorder
				if err := insert(context.Background(), &rec, dl.D, tbl, msgs); err != nil {
					t.Fatalf("%s, %s: %v", dl.Name, sh.Name, err)
				}
				if len(rec.queries) != 1 {
					t.Fatalf("%s, %s: publishing %d rows ran %d statements, want 1", dl.Name, sh.Name, n, len(rec.queries))
				}
				e = append(e, golden.Entry{Name: name, SQL: rec.queries[0]})
			}
			golden.Pin(t, "publish", dl.Name, sh.Name, e)
		}
	}
}

// insertRecorder records the statements it is given and runs none.
type insertRecorder struct{ queries []string }

func (r *insertRecorder) ExecContext(_ context.Context, query string, _ ...any) (sql.Result, error) {
	r.queries = append(r.queries, query)
	return driver.RowsAffected(0), nil
}
