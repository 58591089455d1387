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

// cancelChunk cancels ids, at most a chunk, in one transaction (Admin.Cancel), and counts what
// it did as Act does: a row cancelled at once is changed; a row in work, whose consumer is
// asked to cancel it, in work; a row settled before, or gone, skipped.
func (a *Admin) cancelChunk(ctx context.Context, ids []int64) (Result, error) {
	results, err := a.Cancel(ctx, ids...)
	if err != nil {
		return Result{}, err
	}
	var r Result
	for _, c := range results {
		switch c.Outcome {
		case inbox.Cancelled:
			r.Changed++
		case inbox.CancelRequested:
			r.InWork++
		default:
			r.Skipped++
		}
	}
	return r, nil
}
