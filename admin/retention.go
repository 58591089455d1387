package admin

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// RetentionSchema returns the statement that creates, where it is not there, the table of the
// sweeper leases (inbox_sweeps) on d's database: one row per job table whose consumers run
// inbox.Retention. A database needs it once, and only where retention is on.
func RetentionSchema(d dialect.Dialect) []string {
	return []string{sqltext.CreateSweeps(d.Caps())}
}
