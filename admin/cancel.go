package admin

import (
	"context"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// CancelSchema returns the statement that creates, where it is not there, the table of cancel
// requests (inbox_cancels) on d's database: one row per row in work asked to be cancelled
// (inbox.Cancel). A database needs it once, and only where a table has a CancelledAt column.
func CancelSchema(d dialect.Dialect) []string {
	return []string{sqltext.CreateCancels(d.Caps())}
}

// Cancel cancels the rows of ids as inbox.Cancel does, in a transaction of its own on this
// host's clock: a queued row at once, a row in work through its consumer (the request is
// recorded), and never waiting for a row a consumer holds. It answers what it did to each row.
func (a *Admin) Cancel(ctx context.Context, ids ...int64) ([]inbox.CancelResult, error) {
	return inbox.Cancel(ctx, a.db, a.d, a.t, ids...)
}
