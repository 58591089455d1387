package sqltext_test

import (
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// ratesEntries are the statements over a description's rates table (inbox.Client.SetRate,
// ClearRate, Rates; inbox schema -rates; the lease form's slot takes), where it names one; the
// claims' predicate is in the lease form's files of the shape.
func ratesEntries(s sqltext.SQL, t sqltext.Table) []golden.Entry {
	if t.Rates == "" {
		return nil
	}
	w := s.Rates()
	var e entries
	e.addText("create rates", w.Create())
	e.add("check", w.Check())
	e.add("reset", w.Reset())
	e.add("add slots 0-2", w.AddSlots(0, 3))
	e.add("drop slots", w.DropSlots())
	e.add("clear", w.Clear())
	e.add("list", w.List())
	e.add("rates of the queue", w.OfQueue())
	if t.LimitKey != "" {
		e.add("rate of a key", w.KeyRate())
	}
	e.add("free start slots", w.FreeSlots())
	e.add("start slot take", w.TakeSlot())
	return e
}
