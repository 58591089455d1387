package rowlock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/starts"
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

// rateFull reports whether a rate of candidate c (its queue's, its kind's, its limit key's) was
// found full in this claim.
func (m *memo) rateFull(c candidate) bool {
	return m.fullRates[limit{scope: sqltext.RateQueue}.name()] ||
		c.kind.Valid && m.fullRates[limit{scope: sqltext.RateKind, key: c.kind.String}.name()] ||
		c.key.Valid && m.fullRates[limit{scope: sqltext.RateKey, key: c.key.String}.name()]
}

// takeStarts takes a start slot of each rate row d needs (its queue's, its kind's, its limit
// key's: key, NULL where it has none), each in a statement of its own on the pool that commits
// at once, and reports whether it took them all. A rate without a free slot is added to
// m.fullRates.
func (f *Form[D]) takeStarts(ctx context.Context, v sqltext.Values, d *inbox.Delivery, key sql.NullString, m *memo) (bool, error) {
	w := f.st.SQL().Rates()
	// The start's time is read now, not at the claim's beginning: a slot admits its next start
	// one interval after it, and an earlier time would admit that one early.
	v.NowUs = f.q.Now().UnixMicro()
	if err := f.queueRates(ctx, v, w, m); err != nil {
		return false, err
	}
	needs := []limit{{scope: sqltext.RateQueue}}
	if d.Kind != "" {
		needs = append(needs, limit{scope: sqltext.RateKind, key: d.Kind})
	}
	if key.Valid {
		has, err := f.keyHasRate(ctx, v, w, key.String, m)
		if err != nil {
			return false, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "reading the rate of its limit key %q: %w", key.String, err)
		}
		if has {
			needs = append(needs, limit{scope: sqltext.RateKey, key: key.String})
		}
	}
	for _, r := range needs {
		if r.scope != sqltext.RateKey && !m.rates[r.name()] {
			continue
		}
		if m.fullRates[r.name()] {
			return false, nil
		}
		v.Scope, v.RateKey = r.scope, r.key
		took, last, err := starts.Take(ctx, f.db, w.FreeSlots(), w.TakeSlot(), v, freeRead)
		if err != nil {
			return false, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "taking a start slot of its %s rate %q: %w", r.scope, r.key, err)
		}
		if !took || last {
			// Full now: the later candidates under it, this batch's next rows among them, are
			// passed over before any lock rather than locked and refused.
			m.fullRates[r.name()] = true
		}
		if !took {
			return false, nil
		}
	}
	return true, nil
}

// keyHasRate reports whether limit key k of the claim's queue has a rate: not where the queue
// has no rate per key, and otherwise by a read of its own (KeyRate), once per claim and key.
func (f *Form[D]) keyHasRate(ctx context.Context, v sqltext.Values, w sqltext.Rates, k string, m *memo) (bool, error) {
	if !m.keyRates {
		return false, nil
	}
	if has, asked := m.hasKeyRate[k]; asked {
		return has, nil
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
	if m.hasKeyRate == nil {
		m.hasKeyRate = map[string]bool{}
	}
	m.hasKeyRate[k] = has
	return has, nil
}

// queueRates reads the rates of the claim's queue into m, by name (scope and key), the first time
// the claim needs them. Of its rates per limit key the read returns one at most, which says only
// that the queue has some (sqltext.Rates.OfQueue): keyHasRate asks for each key.
func (f *Form[D]) queueRates(ctx context.Context, v sqltext.Values, w sqltext.Rates, m *memo) error {
	if m.rates != nil {
		return nil
	}
	of := w.OfQueue()
	rows, err := f.db.QueryContext(ctx, of.SQL, of.Bind(nil, &v)...)
	if err != nil {
		return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "reading its rates: %w", err)
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var r limit
		if err := rows.Scan(&r.scope, &r.key); err != nil {
			return err
		}
		if r.scope == sqltext.RateKey {
			m.keyRates = true
			continue
		}
		set[r.name()] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	m.rates = set
	return nil
}

// freeRead is how many free slots of a rate a start's take reads at most.
const freeRead = 8
