package advisory

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/starts"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// FIFO groups, concurrency limits and rate limits (issue 26) in the advisory form: each is held
// by what holds the row, the delivery's session, so that it lives exactly as long as the row's
// own lock, without a counter or a sweep.
//
//   - A group (inbox.Table.GroupKey) is held by a session lock named from the table, the queue and
//     the group key (sqltext.GroupLockPrefix), taken before the row's key on the row's session.
//     The candidates are the heads of their groups, passing over groups whose lock is held
//     elsewhere (decided before the LIMIT); once both locks are held, a statement that starts
//     after them re-checks that the row is still its group's head and its group not paused.
//   - A limit (inbox.Table.Limits) is held by one of its max_in_work slot locks
//     (sqltext.LimitSlotKey, slots 0 to max_in_work-1), tried in turn after the row's key;
//     max_in_work is read from the limits table at each claim.
//   - A start (inbox.Table.Rates) is a rate's start slot, taken by the lease form's
//     compare-and-set (sqltext.Rates.TakeSlot) in autocommit once the row's locks are held and
//     before its attempt is counted. A crash after it over-counts the start, which is safe.
//
// The lock names start with "inbox:": a key template must not render such a name
// (docs/groups.md). Every lock a row needs is released with its key at settlement, in the one
// statement that releases the hold's keys, and by the server when the session ends.

// flows are the statements of the claims' groups, limits and rates; each is empty where the
// description lacks its feature.
type flows struct {
	head                         sqltext.Statement // Advisory.Head
	limits                       sqltext.Statement // Limits.OfQueue
	rates, freeStarts, takeStart sqltext.Statement // Rates.OfQueue, FreeSlots, TakeSlot
	keyRate                      sqltext.Statement // Rates.KeyRate
}

// on reports whether a claim takes more than its row's lock.
func (fl flows) on() bool { return !fl.head.Empty() || !fl.limits.Empty() || !fl.rates.Empty() }

// bindFlows checks the side tables of the description's groups, limits and rates and returns
// the builder of its claims with them, and their statements; paused reports whether the table
// of group holds is there, whose pauses the claims then honour.
func (f *Form[D]) bindFlows(ctx context.Context, db *sql.DB, q inbox.Binding, st *stmt.Table, a sqltext.Advisory) (sqltext.Advisory, flows, error) {
	var fl flows
	s := st.SQL()
	where := sentinel.Queue(f.table.Name, q.Name)
	if f.table.GroupKey != "" {
		// The table of group holds is optional here: the lock is the hold, and the table only
		// carries an operator's pause (admin.PauseGroup), which needs it.
		rows, err := db.QueryContext(ctx, sqltext.CheckGroups().SQL)
		paused := err == nil
		if paused {
			rows.Close()
		}
		a = a.Grouped(sqltext.GroupLockPrefix(lockText(f.table.Name)), paused)
		fl.head = a.Head()
	}
	if f.table.Limits != "" || f.table.Rates != "" {
		a = a.Flows()
	}
	if f.table.Limits != "" {
		w := s.Limits()
		if err := schema.CheckLimits(ctx, db, f.d, f.table, where, false); err != nil {
			return a, fl, err
		}
		fl.limits = w.OfQueue()
		if err := st.Check(ctx, db, "limits of the queue", fl.limits.SQL); err != nil {
			return a, fl, err
		}
	}
	if f.table.Rates != "" {
		w := s.Rates()
		if err := schema.CheckRates(ctx, db, f.d, f.table, where); err != nil {
			return a, fl, err
		}
		fl.rates, fl.freeStarts, fl.takeStart, fl.keyRate = w.OfQueue(), w.FreeSlots(), w.TakeSlot(), w.KeyRate()
		for _, rs := range []sqltext.Statement{fl.rates, fl.freeStarts, fl.takeStart, fl.keyRate} {
			if err := st.Check(ctx, db, "start slots", rs.SQL); err != nil {
				return a, fl, err
			}
		}
	}
	return a, fl, nil
}

// lockText is name as a lock name's literal text may hold it: a quote, a backslash or a NUL
// byte written as an underscore.
func lockText(name string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune("'\\\x00", r) {
			return '_'
		}
		return r
	}, name)
}

// limit is one limit of the claim's queue, as the limits table holds it.
type limit struct {
	scope, key string
	max        int
}

// rate is one rate of the claim's queue: its scope and key.
type rate struct{ scope, key string }

// claimFlows is what one claim read of its queue's limits and rates, and the locks its session
// already holds (a batch's, which it must not take twice: session locks stack or are
// reentrant, so a second take on one session would succeed).
type claimFlows struct {
	limits []limit
	rates  []rate // the queue's and its kinds' rates
	// keyRates says the queue has rates per limit key, which may be one per tenant: a claim asks
	// for the rate of each candidate's key (Rates.KeyRate), and keeps the answers in hasKeyRate.
	keyRates   bool
	hasKeyRate map[string]bool
	mine       map[string]bool
	// full are the limits this claim found with every slot held, whose rows it passes over.
	full map[limit]bool
}

// fullFor reports whether a limit that counts c's row was found full in this claim.
func (cf *claimFlows) fullFor(c candidate) bool {
	for l := range cf.full {
		if l.applies(c) {
			return true
		}
	}
	return false
}

// fullKindsAndKeys are the kinds and the limit keys of the limits found full, in no order.
func (cf *claimFlows) fullKindsAndKeys() (kinds, keys []string) {
	for l := range cf.full {
		switch l.scope {
		case sqltext.ScopeKind:
			kinds = append(kinds, l.key)
		case sqltext.ScopeKey:
			keys = append(keys, l.key)
		}
	}
	return kinds, keys
}

// queueFull reports whether the queue's own limit was found full: no row of it can start.
func (cf *claimFlows) queueFull() bool {
	for l := range cf.full {
		if l.scope == sqltext.ScopeQueue {
			return true
		}
	}
	return false
}

// readFlows reads the limits and rates of the claim's queue.
func (f *Form[D]) readFlows(ctx context.Context) (*claimFlows, error) {
	cf := &claimFlows{}
	v := f.claimed
	if !f.fl.limits.Empty() {
		err := f.query(ctx, f.fl.limits, &v, func(rows *sql.Rows) error {
			var l limit
			if err := rows.Scan(&l.scope, &l.key, &l.max); err != nil {
				return err
			}
			cf.limits = append(cf.limits, l)
			return nil
		})
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "reading the queue's limits from %q: %w", f.table.Limits, err)
		}
	}
	if !f.fl.rates.Empty() {
		err := f.query(ctx, f.fl.rates, &v, func(rows *sql.Rows) error {
			var r rate
			if err := rows.Scan(&r.scope, &r.key); err != nil {
				return err
			}
			if r.scope == sqltext.RateKey {
				cf.keyRates = true // the least key's rate: the queue has rates per key
				return nil
			}
			cf.rates = append(cf.rates, r)
			return nil
		})
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "reading the queue's rates from %q: %w", f.table.Rates, err)
		}
	}
	return cf, nil
}

// query runs st with v on the pool and hands each row to scan.
func (f *Form[D]) query(ctx context.Context, st sqltext.Statement, v *sqltext.Values, scan func(*sql.Rows) error) error {
	rows, err := f.db.QueryContext(ctx, st.SQL, st.Bind(nil, v)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// lockGroup tries, on conn, the lock of c's group, where c has one and the session does not hold
// it already, and returns the keys it took (the group's, or none) and whether c may go on.
func (f *Form[D]) lockGroup(ctx context.Context, conn *sql.Conn, c candidate) ([]string, bool, error) {
	if c.group == "" {
		return nil, true, nil
	}
	ok, err := f.lockName(ctx, conn, c.group)
	if err != nil || !ok {
		return nil, false, err
	}
	return []string{c.group}, true, nil
}

// lockName tries the lock named key on conn without waiting, and reports whether it holds it.
func (f *Form[D]) lockName(ctx context.Context, conn *sql.Conn, key string) (bool, error) {
	v := sqltext.Values{Keys: []string{key}}
	return confirmed(conn.QueryRowContext(ctx, f.s.lock.SQL, f.s.lock.Bind(nil, &v)...))
}

// admit decides, on conn, which holds c's row's key (and its group's lock), whether the row may
// start: it is still its group's head and its group is not paused, a slot of each of its limits
// is free, and a start slot of each of its rates. It returns the slot locks it took, which the
// caller releases with the row's key, and whether the row was admitted; a row not admitted may
// have taken start slots (over-counted, which is safe) and slot locks, returned to be released.
func (f *Form[D]) admit(ctx context.Context, conn *sql.Conn, c candidate, cf *claimFlows) ([]string, bool, error) {
	if c.group != "" {
		v := f.claimed
		v.IDs = []int64{c.id}
		var one int
		err := conn.QueryRowContext(ctx, f.fl.head.SQL, f.fl.head.Bind(nil, &v)...).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil // a settlement moved the group on, or an operator paused it
		}
		if err != nil {
			return nil, false, sentinel.Errorf(nil, sentinel.Row(f.table.Name, c.id), "re-checking that it heads its group: %w", err)
		}
	}
	var slots []string
	for _, l := range cf.limits {
		if !l.applies(c) {
			continue
		}
		slot, err := f.takeLimitSlot(ctx, conn, l, cf)
		if err != nil {
			return slots, false, err
		}
		if slot == "" {
			if cf.full == nil {
				cf.full = map[limit]bool{}
			}
			cf.full[l] = true
			return slots, false, nil
		}
		slots = append(slots, slot)
	}
	rates, err := f.ratesOf(ctx, conn, c, cf)
	if err != nil {
		return slots, false, err
	}
	for _, r := range rates {
		ok, err := f.takeStart(ctx, conn, r)
		if err != nil || !ok {
			return slots, false, err
		}
	}
	return slots, true, nil
}

// ratesOf are the rates candidate c's row needs a start slot of: its queue's, its kind's and its
// limit key's, where they are set. A key's rate is asked for on conn, once per claim and key.
func (f *Form[D]) ratesOf(ctx context.Context, conn *sql.Conn, c candidate, cf *claimFlows) ([]rate, error) {
	var out []rate
	for _, r := range cf.rates {
		if r.scope == sqltext.RateQueue || r.scope == sqltext.RateKind && r.key == c.kind {
			out = append(out, r)
		}
	}
	if !cf.keyRates || c.limitKey == "" {
		return out, nil
	}
	has, asked := cf.hasKeyRate[c.limitKey]
	if !asked {
		v := f.claimed
		v.RateKey = c.limitKey
		var one int
		err := conn.QueryRowContext(ctx, f.fl.keyRate.SQL, f.fl.keyRate.Bind(nil, &v)...).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "reading the rate of limit key %q: %w", c.limitKey, err)
		}
		has = err == nil
		if cf.hasKeyRate == nil {
			cf.hasKeyRate = map[string]bool{}
		}
		cf.hasKeyRate[c.limitKey] = has
	}
	if has {
		out = append(out, rate{scope: sqltext.RateKey, key: c.limitKey})
	}
	return out, nil
}

// applies reports whether limit l counts candidate c's row: the queue's, its kind's or its
// limit key's. A row of no kind or no key (empty) matches no such limit.
func (l limit) applies(c candidate) bool {
	switch l.scope {
	case sqltext.ScopeQueue:
		return true
	case sqltext.ScopeKind:
		return c.kind != "" && l.key == c.kind
	case sqltext.ScopeKey:
		return c.limitKey != "" && l.key == c.limitKey
	}
	return false
}

// takeLimitSlot tries the slot locks of limit l in turn, from 0 to its max_in_work-1, passing
// over those the session already holds, and returns the name of the one it took; empty where
// every slot is held, the limit full.
func (f *Form[D]) takeLimitSlot(ctx context.Context, conn *sql.Conn, l limit, cf *claimFlows) (string, error) {
	queue := ""
	if f.table.Queue != "" {
		queue = f.q.Name
	}
	for i := range l.max {
		name := sqltext.LimitSlotKey(lockText(f.table.Name), queue, l.scope, l.key, i)
		if cf.mine[name] {
			continue
		}
		ok, err := f.lockName(ctx, conn, name)
		if err != nil {
			return "", sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "taking a slot of the %s limit %q: %w", l.scope, l.key, err)
		}
		if ok {
			return name, nil
		}
	}
	return "", nil
}

// takeStart takes a start slot of rate r for a row, in autocommit on conn (starts.Take), and
// reports whether it took one: false where the rate admits no start now.
func (f *Form[D]) takeStart(ctx context.Context, conn *sql.Conn, r rate) (bool, error) {
	v := f.claimed
	v.NowUs, v.Scope, v.RateKey = f.q.Now().UnixMicro(), r.scope, r.key
	took, _, err := starts.Take(ctx, conn, f.fl.freeStarts, f.fl.takeStart, v, candidateSlack)
	if err != nil {
		return false, sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "taking a start slot of the %s rate %q: %w", r.scope, r.key, err)
	}
	return took, nil
}
