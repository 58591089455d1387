package lease

import (
	"context"
	"database/sql"
	"errors"
	"slices"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Rate limits (inbox.Table.Rates). A claim's pick passes over the rows whose queue, kind or limit
// key has no free start slot (sqltext.Rates.free, before its LIMIT); then, in the claim's
// transaction, the claim reads the queue's rates (and, where the queue has rates per key, asks
// for the keys of its rows: keyRates), reads (and locks, skipping those another claim locked) the
// free slots of each rate its rows need, and takes one of each for every row it keeps, writing
// the claim's time into it (takeRates). A row left without a slot is not claimed. The slot is
// the start: it is taken when the claim commits, whatever the handler then does.

// pickRounds is how many times a claim picks at most, where rows were left for want of a slot:
// each round fills a rate's free slots, which the next round's pick then passes over.
const pickRounds = 3

// prepareRates prepares (or, where the claim runs on a pinned connection by its text, checks)
// the statements that take start slots, where the description names a rates table.
func (b *binding) prepareRates(ctx context.Context) error {
	if b.st.Q.Rates == "" {
		return nil
	}
	w := b.st.SQL().Rates()
	ps := []toPrepare{{"rates of the queue", w.OfQueue(), &b.rateOf}, {"free start slots", w.FreeSlots(), &b.freeSlots}, {"start slot take", w.TakeSlot(), &b.takeStart}}
	if b.st.Q.LimitKey != "" {
		ps = append(ps, toPrepare{"rate of a limit key", w.KeyRate(), &b.keyRate})
	}
	return b.prepareAll(ctx, ps)
}

// pickRated runs a claim's pick in tx (pick: its rows, and what it read of their groups and
// limit keys), takes their groups (takeGroups), then their limits' slots (takeSlots), then their
// start slots (takeRates), each take over the rows the one before took, and returns the rows it
// took, at most v.Limit. A row is taken only where all three took; what an earlier take took
// for a row a later one leaves out stays in tx but holds nothing: a group's hold and a limit's
// slot are held only while their holder's lease runs, and the row is never stamped. Only a
// start slot (the last take, a start whether or not the row runs) is spent: a row that took its
// queue's and not its kind's spends the first. The order puts the take that cannot be undone
// last.
// Where rows were left for want of a start slot and fewer than v.Limit were taken, it picks
// again, up to pickRounds times in all: the slots just taken fill the rates those rows needed,
// so the next pick passes over them, to rows of other kinds that the first pick's LIMIT cut
// off. A claim that picked rows of a full kind thus still fills itself with others, rather
// than coming back short and leaving them to the next poll. A row picked again (this
// transaction's locks do not skip it) is taken once.
func (b *binding) pickRated(ctx context.Context, tx dialect.Tx, v sqltext.Values, pick func() (picked, error)) ([]*inbox.Delivery, error) {
	limit := v.Limit.(int)
	var out []*inbox.Delivery
	held := map[int64]bool{}
	for round := 0; ; round++ {
		p, err := pick()
		if err != nil {
			return nil, err
		}
		p = p.notTaken(out, limit-len(out))
		keys := p.keyOf()
		ds, err := b.takeGroups(ctx, tx, p.ds, p.seen, v)
		if err == nil {
			ds, err = b.takeSlots(ctx, tx, ds, keys, held, v)
		}
		if err != nil {
			return nil, err
		}
		ds, short, err := b.takeRates(ctx, tx, ds, keys, v)
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
		for _, d := range ds {
			held[d.ID] = true
		}
		if !short || len(out) >= limit || round == pickRounds-1 {
			return out, nil
		}
	}
}

// picked is what a pick read: its rows and, where the table has groups, what it read of each
// one's group, or, where it has a limit key and limits, each one's limit key.
type picked struct {
	ds   []*inbox.Delivery
	seen []seenHold
	keys []sql.NullString
}

// notTaken is p less the rows of taken, at most n.
func (p picked) notTaken(taken []*inbox.Delivery, n int) picked {
	if len(taken) == 0 && len(p.ds) <= n {
		return p
	}
	var keep picked
	for i, d := range p.ds {
		if len(keep.ds) == n {
			break
		}
		if slices.ContainsFunc(taken, func(t *inbox.Delivery) bool { return t.ID == d.ID }) {
			continue
		}
		keep.ds = append(keep.ds, d)
		if p.seen != nil {
			keep.seen = append(keep.seen, p.seen[i])
		}
		if p.keys != nil {
			keep.keys = append(keep.keys, p.keys[i])
		}
	}
	return keep
}

// keyOf is the limit key of each of p's rows that has one, where the pick read them.
func (p picked) keyOf() map[*inbox.Delivery]string {
	if p.keys == nil {
		return nil
	}
	keys := make(map[*inbox.Delivery]string, len(p.ds))
	for i, d := range p.ds {
		if p.keys[i].Valid {
			keys[d] = p.keys[i].String
		}
	}
	return keys
}

// rate names a rate of the claim's queue: its scope and key.
type rate struct{ scope, key string }

// takeRates takes, in tx, a start slot of every rate each of ds needs (its queue's, its kind's,
// its limit key's, keys giving each row's), in claim order, and returns the rows it took slots
// for; short says a row was left for want of one. Each slot it takes it read free (and locked,
// where the database has row locks) in tx.
func (b *binding) takeRates(ctx context.Context, tx dialect.Tx, ds []*inbox.Delivery, keys map[*inbox.Delivery]string, v sqltext.Values) (out []*inbox.Delivery, short bool, err error) {
	if b.rateOf == nil || len(ds) == 0 {
		return ds, false, nil
	}
	set, err := b.queueRates(ctx, tx, v)
	if err == nil {
		err = b.keyRates(ctx, tx, v, set, ds, keys)
	}
	if err != nil || len(set) == 0 {
		return ds, false, err
	}
	needs := func(d *inbox.Delivery) []rate { return needed(set, d, keys) }
	wanted := map[rate]int{}
	var order []rate
	for _, d := range ds {
		for _, r := range needs(d) {
			if wanted[r] == 0 {
				order = append(order, r)
			}
			wanted[r]++
		}
	}
	free := map[rate][]int64{}
	for _, r := range order {
		if free[r], err = b.freeSlotsOf(ctx, tx, v, r, wanted[r]); err != nil {
			return nil, false, err
		}
	}
	for _, d := range ds {
		took, err := b.takeAll(ctx, tx, v, needs(d), free)
		if err != nil {
			return nil, false, sentinel.Errorf(nil, sentinel.Row(b.st.Raw.Name, d.ID), "taking its start slots: %w", err)
		}
		if !took {
			short = true
			continue
		}
		out = append(out, d)
	}
	return out, short, nil
}

// takeAll takes a slot of each of rs from free, which it consumes, and reports whether it took
// one of each. A slot another claim took since it was read (takeSlotOf changes no row) is
// passed over for the next; a rate left without one leaves the row unclaimed, and the slots it
// took of the other rates admit nothing this interval, never more than their rates.
func (b *binding) takeAll(ctx context.Context, tx dialect.Tx, v sqltext.Values, rs []rate, free map[rate][]int64) (bool, error) {
	if slices.ContainsFunc(rs, func(r rate) bool { return len(free[r]) == 0 }) {
		return false, nil
	}
	for _, r := range rs {
		for took := false; !took; {
			if len(free[r]) == 0 {
				return false, nil
			}
			var err error
			if took, err = b.takeSlotOf(ctx, tx, v, r, free[r][0]); err != nil {
				return false, err
			}
			free[r] = free[r][1:]
		}
	}
	return true, nil
}

// queueRates reads, in tx, the rates of the claim's queue.
func (b *binding) queueRates(ctx context.Context, tx dialect.Tx, v sqltext.Values) (map[rate]bool, error) {
	rows, err := b.rateOf.QueryIn(ctx, tx, b.rateOf.Bind(nil, &v)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := map[rate]bool{}
	for rows.Next() {
		var r rate
		if err := rows.Scan(&r.scope, &r.key); err != nil {
			return nil, err
		}
		set[r] = true
	}
	return set, rows.Err()
}

// needed is the rates of set that d needs: its queue's, its kind's where it has a kind, its
// limit key's where it has one (keys).
func needed(set map[rate]bool, d *inbox.Delivery, keys map[*inbox.Delivery]string) []rate {
	var rs []rate
	if r := (rate{sqltext.RateQueue, ""}); set[r] {
		rs = append(rs, r)
	}
	if r := (rate{sqltext.RateKind, d.Kind}); d.Kind != "" && set[r] {
		rs = append(rs, r)
	}
	if key, ok := keys[d]; ok && set[rate{sqltext.RateKey, key}] {
		rs = append(rs, rate{sqltext.RateKey, key})
	}
	return rs
}

// keyRates adds to set, the rates of the claim's queue as queueRates read them, the rates of
// the limit keys of ds (keys giving each row's) where the queue has rates per key (set holds
// one, the least key's: sqltext.Rates.OfQueue): one read per key, rather than every key's rate
// of the queue at every claim.
func (b *binding) keyRates(ctx context.Context, tx dialect.Tx, v sqltext.Values, set map[rate]bool, ds []*inbox.Delivery, keys map[*inbox.Delivery]string) error {
	if b.keyRate == nil || !hasKeyRates(set) {
		return nil
	}
	asked := map[string]bool{}
	for _, d := range ds {
		key, ok := keys[d]
		if !ok || asked[key] || set[rate{sqltext.RateKey, key}] {
			continue
		}
		asked[key] = true
		v.RateKey = key
		rows, err := b.keyRate.QueryIn(ctx, tx, b.keyRate.Bind(nil, &v)...)
		if err != nil {
			return err
		}
		has := rows.Next()
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if has {
			set[rate{sqltext.RateKey, key}] = true
		}
	}
	return nil
}

// hasKeyRates reports whether set holds a rate per limit key.
func hasKeyRates(set map[rate]bool) bool {
	for r := range set {
		if r.scope == sqltext.RateKey {
			return true
		}
	}
	return false
}

// freeSlotsOf reads, in tx, at most n free slots of rate r, in slot order.
func (b *binding) freeSlotsOf(ctx context.Context, tx dialect.Tx, v sqltext.Values, r rate, n int) ([]int64, error) {
	v.Scope, v.RateKey, v.Limit = r.scope, r.key, n
	rows, err := b.freeSlots.QueryIn(ctx, tx, b.freeSlots.Bind(nil, &v)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var slots []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		slots = append(slots, s)
	}
	return slots, rows.Err()
}

// takeSlotOf writes the claim's time into slot of rate r, in tx, where it is still free, and
// reports whether it did.
func (b *binding) takeSlotOf(ctx context.Context, tx dialect.Tx, v sqltext.Values, r rate, slot int64) (bool, error) {
	v.Scope, v.RateKey, v.Slot = r.scope, r.key, slot
	res, err := b.takeStart.ExecIn(ctx, tx, b.takeStart.Bind(nil, &v)...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
