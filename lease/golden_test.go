package lease

import (
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// TestGoldenStatements pins every statement the lease form builds today, for each golden table
// shape on each database, in internal/sqltext/testdata/lease: with -update it writes the files,
// otherwise it checks that the form still builds what they hold. The files are what
// internal/sqltext's builders are proven against. This test goes when the form takes its
// statements from internal/sqltext.
func TestGoldenStatements(t *testing.T) {
	for _, dl := range golden.Dialects {
		for _, sh := range golden.Shapes {
			st, err := stmt.New(dl.D, inbox.Table(sh.Table))
			if err != nil {
				t.Fatalf("%s, %s: %v", dl.Name, sh.Name, err)
			}
			col, err := dl.D.Quote(sh.Lease)
			if err != nil {
				t.Fatalf("%s, %s: %v", dl.Name, sh.Name, err)
			}
			s := build(st, col)
			e := []golden.Entry{{Name: "claim", SQL: s.claim}}
			if s.stamp != nil {
				e = append(e, golden.Entry{Name: "stamp(1)", SQL: s.stamp(1)}, golden.Entry{Name: "stamp(3)", SQL: s.stamp(3)})
			}
			e = append(e,
				golden.Entry{Name: "extend", SQL: s.extend},
				golden.Entry{Name: "ack", SQL: s.ack},
				golden.Entry{Name: "retry", SQL: s.retry})
			if s.retryAfter != "" {
				e = append(e, golden.Entry{Name: "retryAfter", SQL: s.retryAfter})
			}
			if s.dead != "" {
				e = append(e, golden.Entry{Name: "fail", SQL: s.dead})
			}
			e = append(e,
				golden.Entry{Name: "extendIn(3)", SQL: s.extendIn(3)},
				golden.Entry{Name: "ackIn(3)", SQL: s.ackIn(3)},
				golden.Entry{Name: "retryIn(3)", SQL: s.retryIn(3)})
			if s.retryAfterIn != nil {
				e = append(e, golden.Entry{Name: "retryAfterIn(3)", SQL: s.retryAfterIn(3)})
			}
			if s.deadIn != nil {
				e = append(e, golden.Entry{Name: "failIn(3)", SQL: s.deadIn(3)})
			}
			if s.ackPairs != nil {
				e = append(e, golden.Entry{Name: "ackPairs(2)", SQL: s.ackPairs(2)}, golden.Entry{Name: "retryPairs(2)", SQL: s.retryPairs(2)})
			}
			golden.Pin(t, "lease", dl.Name, sh.Name, e)
		}
	}
}
