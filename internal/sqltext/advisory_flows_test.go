package sqltext_test

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// advisoryFlows adds to forms the advisory form's statements over a table with FIFO groups (to
// its own files), limits (to the limits' files) or rates (to the rates' files), on a
// database with session locks.
func advisoryFlows(forms map[string][]golden.Entry, c *dialect.Caps, s sqltext.SQL, t sqltext.Table, key []sqltext.KeyPart) {
	if c.Locks == dialect.NoSessionLocks {
		return
	}
	a := s.Advisory(key)
	if t.GroupKey != "" {
		g := a.Grouped(sqltext.GroupLockPrefix("jobs"), true)
		e := entries(advisoryEntries(c, g, t.DeadAt != ""))
		e.add("head", g.Head())
		e.add("candidates, groups not paused", a.Grouped(sqltext.GroupLockPrefix("jobs"), false).Candidates())
		e.add("head, groups not paused", a.Grouped(sqltext.GroupLockPrefix("jobs"), false).Head())
		forms["advisory"] = e
	}
	if t.Limits != "" {
		var e entries
		e.add("advisory: limits of the queue", s.Limits().OfQueue())
		e.add("advisory: candidates", a.Flows().Candidates())
		e.add("advisory: candidates, a kind's and 2 keys' limits full", a.Flows().CandidatesNotFull(1, 2))
		e.add("advisory: lock first", a.Flows().LockFirst())
		forms["limits"] = append(forms["limits"], e...)
	}
	if t.Rates != "" {
		var e entries
		e.add("advisory: candidates", a.Flows().Candidates())
		forms["rates"] = append(forms["rates"], e...)
	}
}
