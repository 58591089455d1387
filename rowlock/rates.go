package rowlock

import (
	"context"
	"database/sql"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Rate limits (inbox.Table.Rates). A start slot must not be written in the claim's transaction,
// which stays open while the handler runs: the slot's row would stay locked until the
// settlement commits, and the rate would become a cap on the rows in work. The claim therefore
// takes a row's start slots (its queue's rate's, its kind's) once it has locked the row, each by
// the lease form's compare-and-set (sqltext.Rates.TakeSlot) in a statement of its own that
// commits at once, on another pooled connection. A start so taken counts whatever follows: a
// crash, or a rate of the row found full after its other rate's slot was taken, counts a start
// that never ran, which admits fewer starts than the rate (safe), never more. The rows of a
// rate that its candidates' read (without a lock) saw full are left out before the LIMIT; a rate
// found full after the row was locked rolls the claim back, and it runs again passing over that
// row, with the rate remembered as full for the rest of that claim.

// checkRatesTable fails, where the description names a rates table, when the table has FIFO
// groups too (not built together in this form) or a limit key column (rates per key, which
// this form does not take yet), or the rates table is missing or lacks a column: ErrSchema
// naming the statement that creates it.
func (f *Form[D]) checkRatesTable(ctx context.Context, db *sql.DB, queue string) error {
	if f.t.Rates == "" {
		return nil
	}
	where := sentinel.Queue(f.t.Name, queue)
	switch {
	case f.t.GroupKey != "":
		return sentinel.Errorf(inbox.ErrSchema, where, "rate limits (Rates %q) with FIFO groups (GroupKey %q) are not built in the row lock form yet: leave one of them empty, or hold the table with lease.New", f.t.Rates, f.t.GroupKey)
	case f.t.LimitKey != "":
		// A rate per key would go untaken here: refuse rather than admit its rows unthrottled.
		return sentinel.Errorf(inbox.ErrSchema, where, "rate limits (Rates %q) on a table with a limit key column (LimitKey %q) may hold rates per key, which the row lock form does not take yet: hold the table with lease.New, or leave one of them empty", f.t.Rates, f.t.LimitKey)
	}
	q, err := f.t.Quote(f.d)
	if err != nil {
		return err
	}
	w := sqltext.New(f.d.Caps(), sqltext.Table(q)).Rates()
	rows, err := db.QueryContext(ctx, w.Check().SQL)
	if err == nil {
		return rows.Close()
	}
	if ctx.Err() != nil || dialect.ConnectionFailed(err) {
		return sentinel.Errorf(nil, where, "checking the rates table %q: %w", f.t.Rates, err)
	}
	return sentinel.Errorf(inbox.ErrSchema, where, "its rates table %q (inbox.Table.Rates), which every claim reads, cannot be read (%v): create it with `inbox schema -rates -apply`, or run: %s", f.t.Rates, err, w.Create())
}

// takeStarts takes a start slot of each rate row d needs (its queue's, its kind's), each in a
// statement of its own on the pool that commits at once, and reports whether it took them all.
// A rate without a free slot is added to full.
func (f *Form[D]) takeStarts(ctx context.Context, v sqltext.Values, d *inbox.Delivery, full map[string]bool) (bool, error) {
	w := f.rates()
	// The start's time is read now, not at the claim's beginning: a slot admits its next start
	// one interval after it, and an earlier time would admit that one early.
	v.NowUs = f.q.Now().UnixMicro()
	rates, err := f.queueRates(ctx, v, w)
	if err != nil {
		return false, err
	}
	for _, r := range []limit{{scope: sqltext.RateQueue}, {scope: sqltext.RateKind, key: d.Kind}} {
		if !rates[r.name()] || (r.scope == sqltext.RateKind && d.Kind == "") {
			continue
		}
		if full["rate\x00"+r.name()] {
			return false, nil
		}
		took, err := f.takeStart(ctx, v, w, r)
		if err != nil {
			return false, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "taking a start slot of its %s rate %q: %w", r.scope, r.key, err)
		}
		if !took {
			full["rate\x00"+r.name()] = true
			return false, nil
		}
	}
	return true, nil
}

// rates is the builder of the statements over the rates table.
func (f *Form[D]) rates() sqltext.Rates {
	q, _ := f.t.Quote(f.d) // checked at Open
	return sqltext.New(f.d.Caps(), sqltext.Table(q)).Rates()
}

// queueRates reads the rates of the claim's queue, by name (scope and key).
func (f *Form[D]) queueRates(ctx context.Context, v sqltext.Values, w sqltext.Rates) (map[string]bool, error) {
	of := w.OfQueue()
	rows, err := f.db.QueryContext(ctx, of.SQL, of.Bind(nil, &v)...)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "reading its rates: %w", err)
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var r limit
		if err := rows.Scan(&r.scope, &r.key); err != nil {
			return nil, err
		}
		set[r.name()] = true
	}
	return set, rows.Err()
}

// takeStart takes the oldest free start slot of rate r: it reads the free slots, oldest first,
// and writes the claim's time into the first one still free (a compare-and-set), each statement
// committing at once; it reports whether it took one.
func (f *Form[D]) takeStart(ctx context.Context, v sqltext.Values, w sqltext.Rates, r limit) (bool, error) {
	free, take := w.FreeSlots(), w.TakeSlot()
	v.Scope, v.RateKey, v.Limit = r.scope, r.key, 8
	rows, err := f.db.QueryContext(ctx, free.SQL, free.Bind(nil, &v)...)
	if err != nil {
		return false, err
	}
	var slots []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return false, err
		}
		slots = append(slots, s)
	}
	if err := rows.Close(); err != nil {
		return false, err
	}
	for _, s := range slots {
		v.Slot = s
		res, err := f.db.ExecContext(ctx, take.SQL, take.Bind(nil, &v)...)
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return n == 1, err
		}
	}
	return false, nil
}
