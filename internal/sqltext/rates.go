package sqltext

import (
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/dialect"
)

// Rates builds the statements over a description's rates table (inbox.Table.Rates): the rate
// limits of the job table's queues, kinds and limit keys, and their start slots. A rate of n
// starts per interval is n rows, its slots 0 to n-1, keyed by the job table's name as
// described, the queue (empty where the job table has no queue column), the scope ("queue":
// every row of the queue; "kind": the rows of one kind, rate_key; "key": the rows of one limit
// key, rate_key, the value of the job table's limit key column) and the slot's number, each carrying the rate (starts,
// interval_us) and the time its last start was admitted (started_us, in Unix microseconds on
// the claims' clock; 0: never). A rate of n starts has exactly the slots 0 to n-1.
//
// A claim admits a start only by taking a slot whose last start is at least one interval old,
// writing its own time into it, in the claim's transaction: a slot admits at most one start per
// interval, so any window of one interval holds at most n starts. There is no counter to leak
// and nothing to sweep: a slot is free again by the clock alone. Times are integers so that the
// comparison is the same arithmetic on every database.
type Rates struct{ s SQL }

// Rates returns the builder of the statements over the description's rates table; its
// statements are meaningless where the description names none.
func (s SQL) Rates() Rates { return Rates{s} }

// HasRates reports whether the description names a rates table, which its claims then read.
func (s SQL) HasRates() bool { return s.t.Rates != "" }

// The scopes of a rate, as the rates table spells them: the words of the limits' scopes.
const (
	RateQueue = ScopeQueue // every row of a queue
	RateKind  = ScopeKind  // the rows of one kind of a queue
	RateKey   = ScopeKey   // the rows of one limit key (inbox.Table.LimitKey) of a queue
)

// ReadsLimitKey reports whether a claim's pick reads each row's limit key (after the Columns
// and what it reads of groups): where the table has a limit key column and a limits or a rates
// table, whose slots the form then takes per key.
func (s SQL) ReadsLimitKey() bool {
	return s.t.LimitKey != "" && (s.HasLimits() || s.HasRates())
}

// rateColumns is the rates table's columns, in the order Check reads them.
const rateColumns = "table_name, queue, scope, rate_key, slot, starts, interval_us, started_us"

// Create is the statement that creates the rates table, if it is not there. Its keys fit
// MySQL's and MariaDB's 3,072-byte key in utf8mb4. The second, by the time of each slot's last
// start, is the index a claim finds a rate's oldest slots by (free, FreeSlots): one probe
// whatever the number of slots, where an order by slot number would read every slot started
// within the interval first.
func (w Rates) Create() string {
	text := "TEXT"
	if w.s.c.Catalog == dialect.MySQLCatalog {
		text = KeyText(w.s.c, 191) // compared byte for byte
	}
	return "CREATE TABLE IF NOT EXISTS " + w.s.t.Rates + " (table_name " + text + " NOT NULL, queue " + text +
		" NOT NULL, scope VARCHAR(8) NOT NULL, rate_key " + text + " NOT NULL, slot INTEGER NOT NULL, starts INTEGER NOT NULL," +
		" interval_us BIGINT NOT NULL, started_us BIGINT NOT NULL, PRIMARY KEY (table_name, queue, scope, rate_key, slot)," +
		" UNIQUE (table_name, queue, scope, rate_key, started_us, slot))"
}

// Check reads no row from the rates table and fails where it or one of its columns is
// missing. It binds nothing.
func (w Rates) Check() Statement {
	return Statement{SQL: "SELECT " + rateColumns + " FROM " + w.s.t.Rates + " WHERE 1 = 0"}
}

// key is the predicate of the rows of one rate: the job table's name, the queue, the scope and
// the key, bound in that order.
func (w Rates) key(p *Params) string {
	return "table_name = " + p.Next(ArgTable) + " AND queue = " + p.Next(ArgQueue) + " AND scope = " + p.Next(ArgScope) +
		" AND rate_key = " + p.Next(ArgRateKey)
}

// Reset writes a rate's starts and interval into every slot it has. Where the rate had fewer
// slots, AddSlots adds the others; where it had more, DropSlots deletes them. It binds the
// starts, the interval (ArgFor, microseconds), then the rate's key (table, queue, scope, key).
func (w Rates) Reset() Statement {
	p := w.s.Params()
	set := "UPDATE " + w.s.t.Rates + " SET starts = " + p.Next(ArgStarts) + ", interval_us = " + p.Next(ArgFor)
	return p.statement(set + " WHERE " + w.key(p))
}

// AddSlots inserts the slots from to to-1 of a rate that has none of those numbers yet, never
// started, with the rate's starts and interval; a slot there already is kept as it is. The
// slots' numbers are in the text. For each slot it binds the rate's key (table, queue, scope,
// key), the starts, then the interval.
func (w Rates) AddSlots(from, to int) Statement {
	p := w.s.Params()
	rows := make([]string, 0, to-from)
	for slot := from; slot < to; slot++ {
		rows = append(rows, "("+p.Next(ArgTable)+", "+p.Next(ArgQueue)+", "+p.Next(ArgScope)+", "+p.Next(ArgRateKey)+", "+
			strconv.Itoa(slot)+", "+p.Next(ArgStarts)+", "+p.Next(ArgFor)+", 0)")
	}
	insert := "INSERT INTO " + w.s.t.Rates + " (" + rateColumns + ") VALUES " + strings.Join(rows, ", ")
	if w.s.c.Catalog == dialect.MySQLCatalog {
		return p.statement(insert + " ON DUPLICATE KEY UPDATE slot = slot")
	}
	return p.statement(insert + " ON CONFLICT (table_name, queue, scope, rate_key, slot) DO NOTHING")
}

// DropSlots deletes the slots of a rate from a number on: those past its new starts. It binds
// the rate's key (table, queue, scope, key), then the number (ArgSlot).
func (w Rates) DropSlots() Statement {
	p := w.s.Params()
	return p.statement("DELETE FROM " + w.s.t.Rates + " WHERE " + w.key(p) + " AND slot >= " + p.Next(ArgSlot))
}

// Clear deletes a rate and its slots. It binds the rate's key (table, queue, scope, key).
func (w Rates) Clear() Statement {
	p := w.s.Params()
	return p.statement("DELETE FROM " + w.s.t.Rates + " WHERE " + w.key(p))
}

// List reads the job table's rates, by queue, scope and key: the queue, the scope, the key, the
// starts, the interval (microseconds), and the starts admitted in the last interval before now
// (the slots whose last start is within it). It binds now (ArgNowUs), then the job table's name.
func (w Rates) List() Statement {
	p := w.s.Params()
	used := "SELECT COUNT(*) FROM " + w.s.t.Rates + " inbox_slot WHERE " + sameRate("inbox_slot", "inbox_rate") +
		" AND inbox_slot.started_us > " + p.Next(ArgNowUs) + " - inbox_slot.interval_us"
	return p.statement("SELECT inbox_rate.queue, inbox_rate.scope, inbox_rate.rate_key, inbox_rate.starts, inbox_rate.interval_us, (" + used +
		") FROM " + w.s.t.Rates + " inbox_rate WHERE inbox_rate.table_name = " + p.Next(ArgTable) + " AND inbox_rate.slot = 0" +
		" ORDER BY inbox_rate.queue, inbox_rate.scope, inbox_rate.rate_key")
}

// sameRate is the predicate of a row of the rates table, slot, of the same rate as rate's.
func sameRate(slot, rate string) string {
	var conds []string
	for _, c := range []string{"table_name", "queue", "scope", "rate_key"} {
		conds = append(conds, slot+"."+c+" = "+rate+"."+c)
	}
	return strings.Join(conds, " AND ")
}

// claimQueue is the queue a claim's statement over the rates table names: the claim's, bound,
// or the empty name where the job table has no queue column and is one queue.
func (w Rates) claimQueue(p *Params) string {
	if w.s.t.Queue == "" {
		return "''"
	}
	return p.Next(ArgQueue)
}

// free is the claims' predicate of a row that no rate holds back: the oldest slot of its
// queue's rate, of its kind's (where the table has a kind column) and of its limit key's (where
// it has a limit key column; a NULL key matches no rate) is free at now (its last
// start plus the interval is not after now), or there is no such rate (no slot: COALESCE). The
// oldest slot is the first entry of the index by started_us, one probe whatever the number of
// slots; it is free where any slot is. The queue's rate does not refer to the row, so the
// database reads it once per statement. Being in the claim's WHERE, it is decided before the
// LIMIT: the rows of a kind over its rate never fill a claim in the place of others. It binds,
// for the queue's rate and then for the kind's, the job table's name, the queue (where the table
// has a queue column), then now (ArgNowUs); then, where the table has a limit key column, the
// same for the key's rate.
func (w Rates) free(p *Params) string {
	t := w.s.t
	full := func(scope, key string) string {
		oldest := "SELECT inbox_slot.started_us + inbox_slot.interval_us FROM " + t.Rates + " inbox_slot WHERE inbox_slot.table_name = " +
			p.Next(ArgTable) + " AND inbox_slot.queue = " + w.claimQueue(p) + " AND inbox_slot.scope = '" + scope +
			"' AND inbox_slot.rate_key = " + key + " ORDER BY inbox_slot.started_us LIMIT 1"
		return "COALESCE((" + oldest + "), 0) <= " + p.Next(ArgNowUs)
	}
	conds := []string{full(RateQueue, "''")}
	if t.Kind != "" {
		conds = append(conds, full(RateKind, t.Name+"."+t.Kind))
	}
	if t.LimitKey != "" {
		conds = append(conds, full(RateKey, t.Name+"."+t.LimitKey))
	}
	return strings.Join(conds, " AND ")
}

// OfQueue reads the rates of a claim's queue: the scope and the key of each. A claim reads them
// in its transaction after its pick, to know which slots its rows need. Where the table has a
// limit key column it reads, of the rates per key, which may be one per tenant, only the
// least key's, which says the queue has some: the claim then asks for the keys of its rows
// alone (KeyRate). It binds the job table's name, then the queue (where the table has a queue
// column); where the table has a limit key column, both again.
func (w Rates) OfQueue() Statement {
	p := w.s.Params()
	where := "table_name = " + p.Next(ArgTable) + " AND queue = " + w.claimQueue(p) + " AND slot = 0"
	if w.s.t.LimitKey != "" {
		least := "SELECT MIN(inbox_any.rate_key) FROM " + w.s.t.Rates + " inbox_any WHERE inbox_any.table_name = " + p.Next(ArgTable) +
			" AND inbox_any.queue = " + w.claimQueue(p) + " AND inbox_any.scope = '" + RateKey + "'"
		where += " AND (scope <> '" + RateKey + "' OR rate_key = (" + least + "))"
	}
	return p.statement("SELECT scope, rate_key FROM " + w.s.t.Rates + " WHERE " + where)
}

// KeyRate reads whether a limit key of the claim's queue has a rate: one row where it has. It
// binds the job table's name, the queue (where the table has a queue column), then the key
// (ArgRateKey).
func (w Rates) KeyRate() Statement {
	p := w.s.Params()
	return p.statement("SELECT slot FROM " + w.s.t.Rates + " WHERE table_name = " + p.Next(ArgTable) + " AND queue = " + w.claimQueue(p) +
		" AND scope = '" + RateKey + "' AND rate_key = " + p.Next(ArgRateKey) + " AND slot = 0")
}

// FreeSlots reads, oldest first, at most a limit of a rate's slots that may admit a start at
// now: their last start at least one interval before now. Where the
// database has row locks it locks them and skips those another claim locked (which that claim
// may be taking): two claims never read the same free slot, and neither waits for the other.
// With one writer (SQLite) no other claim runs meanwhile. It binds the job table's name, the
// queue (where the table has a queue column), the scope, the key, now (ArgNowUs), then the limit.
func (w Rates) FreeSlots() Statement {
	p := w.s.Params()
	where := "table_name = " + p.Next(ArgTable) + " AND queue = " + w.claimQueue(p) + " AND scope = " + p.Next(ArgScope) +
		" AND rate_key = " + p.Next(ArgRateKey) + " AND started_us <= " + p.Next(ArgNowUs) + " - interval_us"
	lock := ""
	if w.s.c.SkipLocked {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	return p.statement("SELECT slot FROM " + w.s.t.Rates + " WHERE " + where + " ORDER BY started_us, slot LIMIT " + p.Next(ArgLimit) + lock)
}

// TakeSlot admits a start: it writes now into a slot FreeSlots read (and locked, where the
// database has row locks), in the claim's transaction, where the slot is still free: a
// compare-and-set, so that the slot's one start per interval rests on the write's own check, not
// on the read's lock alone: a slot another claim took meanwhile changes no row and admits
// nothing. It binds now (ArgNowUs), the job table's name, the queue (where the table
// has a queue column), the scope, the key, the slot, then now again.
func (w Rates) TakeSlot() Statement {
	p := w.s.Params()
	set := "UPDATE " + w.s.t.Rates + " SET started_us = " + p.Next(ArgNowUs)
	return p.statement(set + " WHERE table_name = " + p.Next(ArgTable) + " AND queue = " + w.claimQueue(p) + " AND scope = " +
		p.Next(ArgScope) + " AND rate_key = " + p.Next(ArgRateKey) + " AND slot = " + p.Next(ArgSlot) +
		" AND started_us <= " + p.Next(ArgNowUs) + " - interval_us")
}

// andRatesFree is " AND " and the rates' predicate (Rates.free) where the description names a
// rates table; empty otherwise.
func (l Lease) andRatesFree(p *Params) string {
	if !l.s.HasRates() {
		return ""
	}
	return " AND " + l.s.Rates().free(p)
}

// ClaimsInOne reports whether Claim is the whole claim, one statement (dialect.Caps.UpdateFrom),
// rather than a pick that Stamp follows in the claim's transaction. A table with rates or limits
// is claimed by a pick and a stamp everywhere, the slots taken between the two (Rates.TakeSlot;
// Lease's ReadSlots, TakeSlot, NewSlot).
func (l Lease) ClaimsInOne() bool {
	return l.s.c.UpdateFrom && !l.s.HasRates() && !l.s.HasLimits()
}
