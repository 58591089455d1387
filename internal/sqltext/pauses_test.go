package sqltext_test

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// pausesEntries are the statements over a description's pauses table (inbox.Client.Pause,
// Resume, Paused; inbox schema -pauses), where it names one; the claims' predicate is in each
// form's files of the shape.
func pausesEntries(c *dialect.Caps, s sqltext.SQL, t sqltext.Table) []golden.Entry {
	if t.Pauses == "" {
		return nil
	}
	w := s.Pauses()
	var e entries
	e.addText("create pauses", w.Create())
	e.add("check", w.Check())
	e.add("pause", w.Pause())
	e.add("resume", w.Resume())
	if c.Catalog == dialect.PostgresCatalog {
		e.add("resume notifying", w.ResumeNotifying())
	}
	e.add("since", w.Since())
	e.add("list", w.List())
	return e
}
