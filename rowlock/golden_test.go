package rowlock

import (
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// TestGoldenStatements pins every statement the row lock form builds today, for each golden
// table shape on each database the form runs on, in internal/sqltext/testdata/rowlock: with
// -update it writes the files, otherwise it checks that the form still builds what they hold.
// The files are what internal/sqltext's builders are proven against. This test goes when the
// form takes its statements from internal/sqltext.
func TestGoldenStatements(t *testing.T) {
	for _, dl := range golden.Dialects {
		d := dialect.Runtime{Dialect: dl.D}
		if d.Allows(dialect.RowLockForm) != nil {
			continue
		}
		f := &Form[dialect.Runtime]{d: d}
		for _, sh := range golden.Shapes {
			st, err := stmt.New(dl.D, inbox.Table(sh.Table))
			if err != nil {
				t.Fatalf("%s, %s: %v", dl.Name, sh.Name, err)
			}
			e := []golden.Entry{
				{Name: "claim", SQL: claimQuery(st, 1)},
				{Name: "claim(3)", SQL: claimQuery(st, 3)},
				{Name: "ack", SQL: settleQuery(st, "ack", 0)},
			}
			if st.Q.Attempt != "" {
				e = append(e, golden.Entry{Name: "retry", SQL: settleQuery(st, "retry", 0)})
			}
			if st.Q.RetryAfter != "" {
				e = append(e, golden.Entry{Name: "retryAfter", SQL: settleQuery(st, "retry after", 0)})
			}
			fail := "ack"
			if st.Q.DeadAt != "" {
				fail = "fail"
			}
			e = append(e, golden.Entry{Name: "fail", SQL: settleQuery(st, fail, 0)}, golden.Entry{Name: "relock", SQL: sqltext.New(dl.D.Caps(), sqltext.Table(st.Q)).RowLock().Relock()})
			if f.inLists() {
				e = append(e, golden.Entry{Name: "ackIn(3)", SQL: settleQuery(st, "ack", 3)})
				if st.Q.Attempt != "" {
					e = append(e, golden.Entry{Name: "retryIn(3)", SQL: settleQuery(st, "retry", 3)})
				}
				if st.Q.RetryAfter != "" {
					e = append(e, golden.Entry{Name: "retryAfterIn(3)", SQL: settleQuery(st, "retry after", 3)})
				}
				e = append(e, golden.Entry{Name: "failIn(3)", SQL: settleQuery(st, fail, 3)})
			}
			e = append(e,
				golden.Entry{Name: "savepoint", SQL: "SAVEPOINT " + savepoint},
				golden.Entry{Name: "rollbackToSavepoint", SQL: "ROLLBACK TO SAVEPOINT " + savepoint})
			golden.Pin(t, "rowlock", dl.Name, sh.Name, e)
		}
	}
}
