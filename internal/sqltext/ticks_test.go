package sqltext_test

import (
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// ticksEntries are the statements of shape sh's periodic jobs on d (inbox.Periodic), over its
// ticks table: the CREATE TABLE inbox schema -schedules prints, and each statement a tick runs.
func ticksEntries(t *testing.T, d dialect.Dialect, sh golden.Shape) []golden.Entry {
	t.Helper()
	create, err := inbox.TicksSchema(d, inbox.Table(sh.Table))
	if err != nil {
		t.Fatalf("%s, %s: %v", d.Name(), sh.Name, err)
	}
	s, _, _ := quoted(t, d, sh)
	ticks, err := d.Quote(inbox.TicksTable(sh.Table.Name))
	if err != nil {
		t.Fatalf("%s, %s: %v", d.Name(), sh.Name, err)
	}
	k := s.Ticks(ticks)
	var e entries
	e.addText("create table", create)
	e.add("probe", k.Probe())
	e.add("list", k.List())
	e.add("read", k.Read())
	e.add("add", k.Add())
	e.add("take", k.Take())
	e.add("set job", k.SetJob())
	e.add("live", k.Live())
	return e
}
