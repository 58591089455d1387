package sqltext_test

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// retentionEntries are the sweeper lease's statements and the table's purges (inbox.Retention):
// of processed rows, of dead rows and of both, where the table has the columns; the purge's two
// steps where the database's DELETE cannot read its own table.
func retentionEntries(c *dialect.Caps, s sqltext.SQL, t sqltext.Table) []golden.Entry {
	if t.ProcessedAt == "" && t.DeadAt == "" {
		return nil
	}
	var e entries
	e.addText("create sweeps", sqltext.CreateSweeps(c))
	w := sqltext.SweepLease(c)
	e.add("check sweeps", w.Check())
	e.add("ensure", w.Ensure())
	e.add("take", w.Take())
	e.add("renew", w.Renew())
	e.add("leave", w.Leave())
	for _, x := range []struct {
		name string
		e    sqltext.Expiry
	}{
		{"processed", sqltext.Expiry{Processed: true}},
		{"dead", sqltext.Expiry{Dead: true}},
		{"processed and dead", sqltext.Expiry{Processed: true, Dead: true}},
		{"cancelled", sqltext.Expiry{Cancelled: true}},
		{"processed, dead and cancelled", sqltext.Expiry{Processed: true, Dead: true, Cancelled: true}},
	} {
		if (x.e.Processed && t.ProcessedAt == "") || (x.e.Dead && t.DeadAt == "") || (x.e.Cancelled && t.CancelledAt == "") {
			continue
		}
		e.add("purge "+x.name, s.Purge(x.e, 1000))
		if s.Purge(x.e, 1000).Empty() {
			e.add("purge pick "+x.name, s.PurgePick(x.e, 1000))
		}
	}
	if c.Catalog == dialect.MySQLCatalog {
		e.add("purge id", s.PurgeID())
	}
	return e
}
