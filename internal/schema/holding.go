package schema

import (
	"context"
	"database/sql"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// VerifyHolding is Verify for a form other than the lease form that holds the description's
// FIFO groups, concurrency limits and rate limits itself (the advisory form, by session locks):
// it refuses what only the lease form gives but those, and checks the columns as Verify does,
// the group and limit key columns included.
func VerifyHolding(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table, q inbox.Binding) error {
	rest := t
	rest.GroupKey, rest.Limits, rest.Rates = "", "", ""
	if err := leaseOnly(rest, ""); err != nil {
		return err
	}
	return verifyColumns(ctx, db, d, t, "", q)
}
