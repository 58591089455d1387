package advisory

import (
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// TestGoldenStatements pins every statement the advisory form builds today, for each golden
// table shape and its key template on each database the form runs on, in
// internal/sqltext/testdata/advisory: with -update it writes the files, otherwise it checks
// that the form still builds what they hold. The files are what internal/sqltext's builders
// are proven against. This test goes when the form takes its statements from internal/sqltext.
func TestGoldenStatements(t *testing.T) {
	for _, dl := range golden.Dialects {
		d := dialect.Runtime{Dialect: dl.D}
		if d.Allows(dialect.AdvisoryForm) != nil {
			continue
		}
		for _, sh := range golden.Shapes {
			f, err := New(d, inbox.Table(sh.Table), sh.Template())
			if err != nil {
				t.Fatalf("%s, %s: %v", dl.Name, sh.Name, err)
			}
			s := f.s
			e := []golden.Entry{
				{Name: "keyCheck", SQL: s.keyCheck},
				{Name: "candidates", SQL: s.candidates},
				{Name: "lock", SQL: s.lock},
				{Name: "unlock", SQL: s.unlock},
				{Name: "take", SQL: s.take},
			}
			if s.read != "" {
				e = append(e, golden.Entry{Name: "read", SQL: s.read})
			}
			e = append(e, golden.Entry{Name: "ack", SQL: s.ack})
			if s.retryAfter != "" {
				e = append(e, golden.Entry{Name: "retryAfter", SQL: s.retryAfter})
			}
			if s.dead != "" {
				e = append(e, golden.Entry{Name: "fail", SQL: s.dead})
			}
			e = append(e,
				golden.Entry{Name: "unlockMany(3)", SQL: s.unlockMany(3)},
				golden.Entry{Name: "ackMany(3)", SQL: s.ackMany(3)})
			if s.retryAfter != "" {
				e = append(e, golden.Entry{Name: "retryAfterMany(3)", SQL: s.stampMany(s.t.Q.RetryAfter, 3)})
			}
			if s.dead != "" {
				e = append(e, golden.Entry{Name: "failMany(3)", SQL: s.stampMany(s.t.Q.DeadAt, 3)})
			}
			golden.Pin(t, "advisory", dl.Name, sh.Name, e)
		}
	}
}
