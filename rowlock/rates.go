package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Rate limits (inbox.Table.Rates). A start slot must not be written in the claim's transaction,
// which stays open while the handler runs: the slot's row would stay locked until the
// settlement commits, and the rate would become a cap on the rows in work. The claim therefore
// takes a row's start slots (its queue's rate's, its kind's, its limit key's) once it has locked
// the row (and taken its group's hold and its limits' slots), each by the lease form's
// compare-and-set (sqltext.Rates.TakeSlot) in a statement of its own that commits at once, on
// another pooled connection. A start so taken counts whatever follows: a crash, or a rate of the
// row found full after its other rate's slot was taken, counts a start that never ran, which
// admits fewer starts than the rate (safe), never more. The rows of a rate that its candidates'
// read (without a lock) saw full are left out before the LIMIT, so a key, a kind or a group's
// head over its rate holds back no other row; a rate found full after the row was locked rolls
// the claim back (which lets go the row's group and slots), and it runs again passing over that
// row, with the rate remembered as full for the rest of that claim, so that the rows under it are
// passed over before any lock. A group whose head is so passed over stays blocked: its next row
// is not its head (sqltext.RowLock.Candidates).
//
// Rates per limit key may be one per tenant: the claim reads of the queue's rates per key only
// whether it has any (sqltext.Rates.OfQueue), and then asks, once per claim, for the rate of each
// key its rows carry (KeyRate).

// The entries of a claim's memo (full) that concern rates: a rate found full, and whether a
// limit key has a rate. The memo lives for one Claim (or ClaimBatch), a few milliseconds, and
// a rate frees by the clock alone, so an entry may at worst pass a row over until the next
// claim.
const (
	memoFullRate  = "rate\x00"
	memoKeyRate   = "keyrate\x00"
	memoNoKeyRate = "nokeyrate\x00"
)

// rateFull reports whether a rate of candidate c (its queue's, its kind's, its limit key's) was
// found full in this claim.
func rateFull(c candidate, full map[string]bool) bool {
	return full[memoFullRate+limit{scope: sqltext.RateQueue}.name()] ||
		c.kind.Valid && full[memoFullRate+limit{scope: sqltext.RateKind, key: c.kind.String}.name()] ||
		c.key.Valid && full[memoFullRate+limit{scope: sqltext.RateKey, key: c.key.String}.name()]
}

// takeStarts takes a start slot of each rate row d needs (its queue's, its kind's, its limit
// key's: key, NULL where it has none), each in a statement of its own on the pool that commits
// at once, and reports whether it took them all. A rate without a free slot is added to full.
func (f *Form[D]) takeStarts(ctx context.Context, v sqltext.Values, d *inbox.Delivery, key sql.NullString, full map[string]bool) (bool, error) {
	w := f.rates()
	// The start's time is read now, not at the claim's beginning: a slot admits its next start
	// one interval after it, and an earlier time would admit that one early.
	v.NowUs = f.q.Now().UnixMicro()
	rates, err := f.queueRates(ctx, v, w)
	if err != nil {
		return false, err
	}
	needs := []limit{{scope: sqltext.RateQueue}}
	if d.Kind != "" {
		needs = append(needs, limit{scope: sqltext.RateKind, key: d.Kind})
	}
	if key.Valid {
		r := limit{scope: sqltext.RateKey, key: key.String}
		if rates[r.name()], err = f.keyHasRate(ctx, v, w, key.String, rates, full); err != nil {
			return false, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "reading the rate of its limit key %q: %w", key.String, err)
		}
		needs = append(needs, r)
	}
	for _, r := range needs {
		if !rates[r.name()] {
			continue
		}
		if full[memoFullRate+r.name()] {
			return false, nil
		}
		took, last, err := f.takeStart(ctx, v, w, r)
		if err != nil {
			return false, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "taking a start slot of its %s rate %q: %w", r.scope, r.key, err)
		}
		if !took || last {
			// Full now: the later candidates under it, this batch's next rows among them, are
			// passed over before any lock rather than locked and refused.
			full[memoFullRate+r.name()] = true
		}
		if !took {
			return false, nil
		}
	}
	return true, nil
}

// keyHasRate reports whether limit key k of the claim's queue has a rate: not where the queue
// has no rate per key (rates, as queueRates read them, holds one where it has), and otherwise
// by a read of its own, once per claim (full memoizes the answer).
func (f *Form[D]) keyHasRate(ctx context.Context, v sqltext.Values, w sqltext.Rates, k string, rates, full map[string]bool) (bool, error) {
	r := limit{scope: sqltext.RateKey, key: k}
	switch {
	case rates[r.name()] || full[memoKeyRate+k]:
		return true, nil
	case full[memoNoKeyRate+k] || !slices.ContainsFunc(slices.Collect(maps.Keys(rates)), isKeyRate):
		return false, nil
	}
	q := w.KeyRate()
	v.RateKey = k
	rows, err := f.db.QueryContext(ctx, q.SQL, q.Bind(nil, &v)...)
	if err != nil {
		return false, err
	}
	has := rows.Next()
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, err
	}
	if has {
		full[memoKeyRate+k] = true
	} else {
		full[memoNoKeyRate+k] = true
	}
	return has, nil
}

// isKeyRate reports whether name, a rate's limit.name, is a rate per limit key's.
func isKeyRate(name string) bool {
	return strings.HasPrefix(name, sqltext.RateKey+"\x00")
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

// takeStart takes the oldest free start slot of rate r: it reads the free slots, oldest first
// (at most freeRead), and writes the claim's time into the first one still free (a
// compare-and-set), each statement committing at once; it reports whether it took one, and
// whether that was the last free slot it read, of fewer than freeRead: the rate is then full, but
// for slots another claim was taking as they were read (FreeSlots skips the slots it locks).
func (f *Form[D]) takeStart(ctx context.Context, v sqltext.Values, w sqltext.Rates, r limit) (took, last bool, err error) {
	free, take := w.FreeSlots(), w.TakeSlot()
	v.Scope, v.RateKey, v.Limit = r.scope, r.key, freeRead
	rows, err := f.db.QueryContext(ctx, free.SQL, free.Bind(nil, &v)...)
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
	for i, s := range slots {
		v.Slot = s
		res, err := f.db.ExecContext(ctx, take.SQL, take.Bind(nil, &v)...)
		if err != nil {
			return false, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return n == 1, i == len(slots)-1 && len(slots) < freeRead, err
		}
	}
	return false, false, nil
}

// freeRead is how many free slots of a rate takeStart reads at most.
const freeRead = 8
