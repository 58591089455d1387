// Package starts takes a rate limit's start slots (inbox.Table.Rates) in statements that commit
// at once, as the row lock and advisory forms do once a row is held; the lease form takes them
// in its claim's transaction instead.
package starts

import (
	"context"
	"database/sql"

	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Querier runs a statement by its text: an *sql.DB, or an *sql.Conn outside a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Take takes the oldest free start slot of the rate v names (its scope and key) at v's time: it
// reads at most read free slots, oldest first (free: sqltext.Rates.FreeSlots), and writes v's
// time into the first one still free (take: TakeSlot, a compare-and-set, so that two claims
// never both take one slot), each statement on q committing at once. It reports whether it took
// one, and whether that was the last free slot it read, of fewer than read: the rate is then
// full, but for slots another claim was taking as they were read.
func Take(ctx context.Context, q Querier, free, take sqltext.Statement, v sqltext.Values, read int) (took, last bool, err error) {
	v.Limit = read
	rows, err := q.QueryContext(ctx, free.SQL, free.Bind(nil, &v)...)
	if err != nil {
		return false, false, err
	}
	var slots []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return false, false, err
		}
		slots = append(slots, s)
	}
	if err := rows.Close(); err != nil {
		return false, false, err
	}
	if err := rows.Err(); err != nil {
		return false, false, err
	}
	for i, s := range slots {
		v.Slot = s
		res, err := q.ExecContext(ctx, take.SQL, take.Bind(nil, &v)...)
		if err != nil {
			return false, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return n == 1 && err == nil, i == len(slots)-1 && len(slots) < read, err
		}
	}
	return false, false, nil
}
