package sqltext_test

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// limitsEntries are the statements over a description's limits table and the slots table
// (inbox.Client.SetLimit, ClearLimit, Limits; inbox schema -limits; the lease form's Open check),
// where it names one; the claim's predicate and the slots' take are in the lease form's files of
// the shape.
func limitsEntries(c *dialect.Caps, s sqltext.SQL, lease string) []golden.Entry {
	if !s.HasLimits() {
		return nil
	}
	w := s.Limits()
	var e entries
	e.addText("create limits", w.Create())
	e.addText("create slots", sqltext.CreateSlots(c))
	e.add("check", w.Check())
	e.add("check slots", sqltext.CheckSlots())
	e.add("set", w.Set())
	e.add("clear", w.Clear())
	e.add("list", w.List(lease))
	e.add("any slot", w.AnySlot())
	e.add("stale", w.Stale(lease))
	e.add("drop", w.Drop())
	return e
}
