package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"slices"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Concurrency limits (inbox.Table.Limits). A row in work under a limit holds one of the limit's
// slots, a row of inbox_slots numbered below the limit, locked FOR UPDATE SKIP LOCKED in the
// claim's own transaction (sqltext.RowLock.LockSlot), so that the slot frees exactly when the row's
// own lock does. The claim reads its candidates without a lock, locks each one's row by its id (and
// its group's hold, over groups), then takes its slots (the most specific limit first: key, kind,
// then queue) (pickByID). A candidate whose slot was refused rolls the claim back (its row's lock
// and a slot once locked are let go only with the transaction), and the limit found full is
// remembered for the rest of the Claim: the claim runs again with the rows of a full kind's or
// key's limit left out of its candidates before their LIMIT, so that however many of them lead the
// queue the rows behind them are reached (pg-boss#871's bug was a full key starving them). Such a
// run does not count against groupTries: each one finds a limit full that the next leaves out, and
// a queue has so many limits. A full queue limit ends the claim.
//
// With FIFO groups, a candidate is its group's head (sqltext.RowLock.Candidates): a head whose
// limit was found full is left out of the candidates, and its group with it, since the group's
// next row is not its head. A head whose slot is refused after its group's hold was taken rolls
// the claim back, which lets the group go.

// limit is one limit a candidate is under.
type limit struct {
	scope, key string
	max        int64
}

// name is the limit's (or a rate's) key in the memo of full rates.
func (l limit) name() string { return l.scope + "\x00" + l.key }

// memo is what one claim learned of its queue's limits and rates, kept for the rest of the
// claim (a few milliseconds: a slot frees with its holder's commit and a rate by the clock, so
// an entry at worst passes a row over until the next claim).
type memo struct {
	// The limits found full, whose rows the candidates leave out (sqltext.RowLock.Candidates):
	// the queue's, which ends the claim, and the kinds' and limit keys'.
	queueFull           bool
	fullKinds, fullKeys []string
	fullRates           map[string]bool // limit.name (a rate's scope and key) of the rates found full
	// rates are the names of the queue's rates, read once a claim (nil until then); keyRates
	// says the queue has rates per limit key, whose keys hasKeyRate holds the answers for.
	rates      map[string]bool
	keyRates   bool
	hasKeyRate map[string]bool
}

// fullLimit adds l, found full, to the limits whose rows the claim's candidates leave out. A
// limit found full again (a row the candidates did not leave out, where the column's collation
// and the limits' read compare keys differently) is not added twice, so that the claim that
// found it counts against groupTries.
func (m *memo) fullLimit(l limit) {
	switch {
	case l.scope == sqltext.ScopeQueue:
		m.queueFull = true
	case l.scope == sqltext.ScopeKind && !slices.Contains(m.fullKinds, l.key):
		m.fullKinds = append(m.fullKinds, l.key)
	case l.scope == sqltext.ScopeKey && !slices.Contains(m.fullKeys, l.key):
		m.fullKeys = append(m.fullKeys, l.key)
	}
}

// fullLimits counts the limits found full.
func (m *memo) fullLimits() int {
	n := len(m.fullKinds) + len(m.fullKeys)
	if m.queueFull {
		n++
	}
	return n
}

// takeSlots takes, in tx, a slot of each of ls, the limits of row id, which tx has locked, and
// reports whether it took them all. A limit found full is added to m (fullLimit); slots without their
// row are added to pass.slots. Where it took them not all, the claim must roll back: the row's
// lock and the slots taken are let go only with the transaction.
func (f *Form[D]) takeSlots(ctx context.Context, tx dialect.Tx, v sqltext.Values, id int64, ls []limit, m *memo, pass *groupPass) (bool, error) {
	lock, there := f.text.LockSlot(), f.text.SlotsThere()
	for _, l := range ls {
		w := v
		w.Scope, w.LimitKey, w.Limit = l.scope, l.key, l.max
		took, err := f.lockSlot(ctx, tx, lock, w, l.max, id)
		if err != nil {
			return false, sentinel.Errorf(nil, sentinel.Row(f.t.Name, id), "taking a slot of its %s limit %q: %w", l.scope, l.key, err)
		}
		if took {
			continue
		}
		var n int64
		if err := tx.QueryRowContext(ctx, there.SQL, there.Bind(nil, &w)...).Scan(&n); err != nil {
			return false, sentinel.Errorf(nil, sentinel.Row(f.t.Name, id), "counting the slots of its %s limit %q: %w", l.scope, l.key, err)
		}
		if n < l.max {
			pass.slots = append(pass.slots, l)
		} else {
			m.fullLimit(l)
		}
		return false, nil
	}
	return true, nil
}

// limitsOf reads the limits row id is under, the most specific first.
func (f *Form[D]) limitsOf(ctx context.Context, tx dialect.Tx, v sqltext.Values, id int64) ([]limit, error) {
	q := f.text.RowLimits()
	v.IDs = []int64{id}
	rows, err := tx.QueryContext(ctx, q.SQL, q.Bind(nil, &v)...)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Row(f.t.Name, id), "reading its concurrency limits: %w", err)
	}
	defer rows.Close()
	var ls []limit
	for rows.Next() {
		var l limit
		if err := rows.Scan(&l.scope, &l.key, &l.max); err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, rows.Err()
}

// addSlots inserts the rows of every slot below each limit of ls that has none, each in a
// statement of its own that commits at once.
func (f *Form[D]) addSlots(ctx context.Context, ls []limit) error {
	add := f.text.AddSlot()
	for _, l := range ls {
		for slot := range l.max {
			v := f.claimed
			v.Scope, v.LimitKey, v.Slot = l.scope, l.key, slot
			if _, err := f.db.ExecContext(ctx, add.SQL, add.Bind(nil, &v)...); err != nil && !dialect.DuplicateOn(err, "PRIMARY") {
				return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "adding slot %d of the %s limit %q: %w", slot, l.scope, l.key, err)
			}
		}
	}
	return nil
}

// lockSlot takes the first slot below max of w's limit that no other transaction holds, probing
// them from one that id picks (so that claims of several rows do not all probe slot 0 first),
// and reports whether it took one.
func (f *Form[D]) lockSlot(ctx context.Context, tx dialect.Tx, lock sqltext.Statement, w sqltext.Values, max, id int64) (bool, error) {
	for i := range max {
		w.Slot = (id + i) % max
		var slot int64
		err := tx.QueryRowContext(ctx, lock.SQL, lock.Bind(nil, &w)...).Scan(&slot)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
	}
	return false, nil
}
