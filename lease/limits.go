package lease

import (
	"cmp"
	"context"
	"database/sql"
	"slices"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/isolation"
)

// Concurrency limits (inbox.Table.Limits). The claim's pick skips rows whose limits are full
// (sqltext.Lease.Claim, before its LIMIT); then, in the claim's own transaction, the form takes
// a slot of every limit of each picked row (takeSlots) and stamps only the rows that took all of
// theirs. A slot names its holder row and is held while that row's lease runs ahead, so
// extensions and settlements, which write only the row, extend and release it with the row, and
// a crashed consumer's slots free when its leases run out. On Postgres the claim is then a
// pick and a stamp in a READ COMMITTED transaction, as on MySQL and MariaDB, rather than one
// statement.

// limitsClaimLevel is the claim's transaction on Postgres where the table has limits: READ
// COMMITTED, whose every statement reads what committed before it, as the slots' compare-and-
// set needs.
var limitsClaimLevel = dialect.Postgres[isolation.ReadCommitted]{}

// claimLevelOn is the level the claim's transaction opens at on c's database: limitsClaimLevel
// on Postgres, claimLevel on MySQL and MariaDB.
func claimLevelOn(c *dialect.Caps) dialect.Dialect {
	if c.Catalog == dialect.PostgresCatalog {
		return limitsClaimLevel
	}
	return claimLevel
}

// prepareSlots prepares (or, where the claim runs on a pinned connection by its text, checks)
// the statements that read a limit's slots and take one, where the description names a limits
// table.
func (b *binding) prepareSlots(ctx context.Context) error {
	if b.st.Q.Limits == "" {
		return nil
	}
	return b.prepareAll(ctx, []toPrepare{
		{"slots read", b.sql.ReadSlots(), &b.readSlots},
		{"slot take", b.sql.TakeSlot(), &b.takeSlot},
		{"slot take of a new slot", b.sql.NewSlot(), &b.newSlot},
	})
}

// toPrepare is a statement a binding runs beside its claim: what it is (for errors), its text,
// and the field it goes to.
type toPrepare struct {
	what string
	st   sqltext.Statement
	into **stmt.Stmt
}

// prepareAll prepares each of ps, or, where the claim runs on a pinned connection by its text
// (SQLite), checks it and runs it by its text.
func (b *binding) prepareAll(ctx context.Context, ps []toPrepare) error {
	for _, p := range ps {
		if b.st.D.Caps().BeginsByStatement {
			if err := b.st.Check(ctx, b.db, p.what, p.st.SQL); err != nil {
				return err
			}
			*p.into = stmt.ByText(b.db, p.st)
			continue
		}
		s, err := b.st.Statement(ctx, b.db, p.what, p.st)
		if err != nil {
			return err
		}
		*p.into = s
	}
	return nil
}

// scanClaimed reads the rows of a pick: deliveries, what the pick read of each one's group
// (scanPick) and, where the table has a limit key column and limits or rates
// (sqltext.SQL.ReadsLimitKey), each one's limit key (sqltext.Lease.Claim's limitRead, after
// what it reads of groups).
func (b *binding) scanClaimed(rows *sql.Rows) (picked, error) {
	if !b.st.SQL().ReadsLimitKey() {
		ds, seen, err := b.scanPick(rows)
		return picked{ds: ds, seen: seen}, err
	}
	defer rows.Close()
	grouped := b.st.Q.GroupKey != ""
	var p picked
	for rows.Next() {
		var key sql.NullString
		var h seenHold
		d, err := b.st.ScanOne(func(dest ...any) error {
			if grouped {
				dest = append(dest, &h.group, &h.holder, &h.token)
			}
			return rows.Scan(append(dest, &key)...)
		})
		if err != nil {
			return picked{}, err
		}
		p.ds, p.keys = append(p.ds, d), append(p.keys, key)
		if grouped {
			h.id = d.ID
			p.seen = append(p.seen, h)
		}
	}
	return p, rows.Err()
}

// limitOf is a limit a claimed row may be under: its scope and key.
type limitOf struct{ scope, key string }

// takeSlots takes, in tx, a slot of every limit of each of ds (its queue's, its kind's, its
// limit key's, each where it is set), limit by limit in scope and key order (so that two claims
// take slots of the limits they share in one order), and returns those of ds that took a slot of
// each of their limits, in their order. A row that could not take one (the limit is full, or
// other claims took the slots this one read free) is not claimed; a slot it took of another of
// its limits names a row whose lease does not run, so it stays free. keys gives each row's limit
// key (by row, since takeGroups may have left some of the pick's rows out); held names the rows
// this claim took in an earlier round (pickRated), not stamped yet, whose slots ReadSlots reads
// free but which are theirs.
func (b *binding) takeSlots(ctx context.Context, tx dialect.Tx, ds []*inbox.Delivery, keys map[*inbox.Delivery]string, held map[int64]bool, v sqltext.Values) ([]*inbox.Delivery, error) {
	if b.st.Q.Limits == "" || len(ds) == 0 {
		return ds, nil
	}
	if b.st.Q.Queue == "" {
		v.Queue = "" // a table of one queue keys its limits by the empty name
	}
	under := map[limitOf][]int{}
	for i, d := range ds {
		under[limitOf{sqltext.ScopeQueue, ""}] = append(under[limitOf{sqltext.ScopeQueue, ""}], i)
		if b.st.Q.Kind != "" && d.Kind != "" {
			under[limitOf{sqltext.ScopeKind, d.Kind}] = append(under[limitOf{sqltext.ScopeKind, d.Kind}], i)
		}
		if key, ok := keys[d]; ok {
			under[limitOf{sqltext.ScopeKey, key}] = append(under[limitOf{sqltext.ScopeKey, key}], i)
		}
	}
	limits := make([]limitOf, 0, len(under))
	for l := range under {
		limits = append(limits, l)
	}
	slices.SortFunc(limits, func(a, b limitOf) int { return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.key, b.key)) })
	lost := make([]bool, len(ds))
	for _, l := range limits {
		var rows []int
		for _, i := range under[l] {
			if !lost[i] {
				rows = append(rows, i)
			}
		}
		if len(rows) == 0 {
			continue
		}
		took, err := b.takeSlotsOf(ctx, tx, l, ds, rows, held, v)
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Queue(b.st.Raw.Name, b.q.Name), "taking a slot of the limit per %s %q: %w", l.scope, l.key, err)
		}
		for _, i := range rows {
			lost[i] = lost[i] || !took[i]
		}
	}
	out := ds[:0:0]
	for i, d := range ds {
		if !lost[i] {
			out = append(out, d)
		}
	}
	return out, nil
}

// slotSeen is a slot of a limit as ReadSlots read it.
type slotSeen struct {
	slot   int
	holder int64
	token  any
	held   bool
}

// readLimit reads limit l and its slots in tx: its max_in_work (set false: no such limit), and
// its slots in slot order.
func (b *binding) readLimit(ctx context.Context, tx dialect.Tx, l limitOf, v sqltext.Values) (max int, set bool, slots []slotSeen, err error) {
	v.Scope, v.LimitKey = l.scope, l.key
	rows, err := b.readSlots.QueryIn(ctx, tx, b.readSlots.Bind(nil, &v)...)
	if err != nil {
		return 0, false, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var slot, holder sql.NullInt64
		var token any
		var held int
		if err := rows.Scan(&max, &slot, &holder, &token, &held); err != nil {
			return 0, false, nil, err
		}
		set = true
		if slot.Valid {
			slots = append(slots, slotSeen{slot: int(slot.Int64), holder: holder.Int64, token: token, held: held == 1})
		}
	}
	return max, set, slots, rows.Err()
}

// takeSlotsOf takes a slot of limit l for each of the rows of ds it names, in their order, while
// the limit has room, and reports which took one (all where l is not set). The limit has no
// room where its held slots number max or more, or one of them is numbered at or above max
// (rows claimed before the limit was lowered, which finish first). Each row tries first a free
// slot that already names it (so that a row retried and claimed again does not leave a second
// slot naming it, which would count it twice while it runs), then the free slots in number
// order from id mod max on (candidates), then the lowest numbers below max that have no slot yet
// (so that a limit keeps about as many slot rows as it ever had rows in work at once); a slot
// another claim took since the read is passed over for the next.
func (b *binding) takeSlotsOf(ctx context.Context, tx dialect.Tx, l limitOf, ds []*inbox.Delivery, rows []int, held map[int64]bool, v sqltext.Values) (map[int]bool, error) {
	max, set, slots, err := b.readLimit(ctx, tx, l, v)
	if err != nil {
		return nil, err
	}
	for i := range slots {
		// A slot an earlier round of this claim took: its holder is stamped only at the end.
		slots[i].held = slots[i].held || held[slots[i].holder]
	}
	took := map[int]bool{}
	if !set {
		for _, i := range rows {
			took[i] = true
		}
		return took, nil
	}
	room := max
	numbered := map[int]bool{}
	for _, s := range slots {
		numbered[s.slot] = true
		if s.held {
			room--
			if s.slot >= max {
				return took, nil
			}
		}
	}
	tried := map[int]bool{}
	next := 0 // the lowest number below max that may have no slot yet
	v.Scope, v.LimitKey = l.scope, l.key
	for _, i := range rows {
		if room <= 0 {
			break
		}
		id := ds[i].ID
		for _, s := range candidates(slots, id, max) {
			if tried[s.slot] {
				continue
			}
			tried[s.slot] = true
			ok, err := b.takeOneSlot(ctx, tx, id, s, v)
			if err != nil {
				return nil, err
			}
			if ok {
				took[i] = true
				break
			}
		}
		for ; !took[i] && next < max; next++ {
			if numbered[next] {
				continue
			}
			numbered[next] = true
			ok, err := b.takeNewSlot(ctx, tx, id, next, v)
			if err != nil {
				return nil, err
			}
			took[i] = ok
		}
		if took[i] {
			room--
		}
	}
	return took, nil
}

// candidates are the free slots below max that row id may take: the one that names it first,
// then the others in number order. Every claim thus takes the slots of a limit in one order, as
// it takes the limits themselves in scope and key order, so that no two claims each hold a slot
// the other's compare-and-set waits for: on Postgres such a cycle waits out deadlock_timeout
// (1 s) before one claim fails, and the others commit rows whose lease, stamped before the
// wait, has run out meanwhile (TestFlowsSurviveKilledConnections, lease-postgres-limits).
// Trying from id mod max on, to spread claims side by side over the slots, made those cycles.
func candidates(slots []slotSeen, id int64, max int) []slotSeen {
	var own, others []slotSeen
	for _, s := range slots {
		switch {
		case s.held || s.slot >= max:
		case s.holder == id:
			own = append(own, s)
		default:
			others = append(others, s)
		}
	}
	return append(own, others...)
}

// takeOneSlot takes slot s, read free, for row id by a compare-and-set of the holder and token
// read, and reports whether it did.
func (b *binding) takeOneSlot(ctx context.Context, tx dialect.Tx, id int64, s slotSeen, v sqltext.Values) (bool, error) {
	v.IDs, v.Slot, v.Holder, v.Tokens = []int64{id}, s.slot, s.holder, []any{s.token}
	res, err := b.takeSlot.ExecIn(ctx, tx, b.takeSlot.Bind(nil, &v)...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// takeNewSlot inserts slot number n, which had no row when the limit was read, for row id, and
// reports whether it did (another claim may have inserted it since).
func (b *binding) takeNewSlot(ctx context.Context, tx dialect.Tx, id int64, n int, v sqltext.Values) (bool, error) {
	v.IDs, v.Slot = []int64{id}, n
	res, err := b.newSlot.ExecIn(ctx, tx, b.newSlot.Bind(nil, &v)...)
	if dialect.DuplicateOn(err, "PRIMARY") {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	affected, err := res.RowsAffected()
	return affected == 1, err
}
