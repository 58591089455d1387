package sqltext

import (
	"strings"

	"github.com/sqlinbox/inbox/dialect"
)

// Concurrency limits (inbox.Table.Limits): at most max_in_work rows in work at once per queue,
// per kind and per limit key, across every consumer and process, in the lease form.
//
// A limit is a row of the description's limits table: the job table's name, the queue (empty
// where the table has no queue column), the scope (ScopeQueue, ScopeKind, ScopeKey), the key
// (empty for a queue's limit; the kind's name; the limit key) and max_in_work. A row in work
// under a limit holds one of its slots, a row of SlotsTable numbered from 0 below max_in_work,
// which names the row (holder_id) and the token of the claim that took it (holder_token). A
// slot is held while its holder's lease runs ahead of now, and only then: like a FIFO group's
// hold (GroupsTable) it has no expiry of its own, so every extension, settlement and expiry of
// the holder's lease extends, releases or ends the slot without writing to SlotsTable, and a
// crashed consumer's slot frees when its lease runs out. Slot numbers below max_in_work are
// what bounds the rows in work: each has one holder at a time, taken by a compare-and-set of
// the slot a claim read (TakeSlot) or by an INSERT of a slot number no row holds yet
// (NewSlot).

// SlotsTable is the table of concurrency slots: one row per job table, queue, scope, key and
// slot number a claim has taken.
const SlotsTable = "inbox_slots"

// The scopes of a limit, as the limits and slots tables hold them.
const (
	ScopeQueue = "queue" // every row of the queue; its key is empty
	ScopeKind  = "kind"  // the rows of one kind; its key is the kind's name
	ScopeKey   = "key"   // the rows of one limit key (inbox.Table.LimitKey)
)

// HasLimits reports whether the description names a limits table, which claims then ask.
func (s SQL) HasLimits() bool { return s.t.Limits != "" }

// Limits builds the statements over the description's limits table (inbox.Table.Limits) and
// SlotsTable; its statements are meaningless where the description names none.
type Limits struct{ s SQL }

// Limits returns the builder of the statements over the limits and slots tables.
func (s SQL) Limits() Limits { return Limits{s} }

// keyTypes are the types of the limits' and slots' key columns on c's database: the job
// table's name, and text (the queue, the scope, the key). On MySQL and MariaDB keys that
// compare byte for byte (KeyText), whose primary key, with the slot number, fits the
// 3,072-byte key in utf8mb4.
func keyTypes(c *dialect.Caps) (name, text, scope string) {
	if c.Catalog == dialect.MySQLCatalog {
		return KeyText(c, 64), KeyText(c, 191), "VARCHAR(8)"
	}
	return "TEXT", "TEXT", "TEXT"
}

// Create is the statement that creates the limits table, if it is not there.
func (w Limits) Create() string {
	name, text, scope := keyTypes(w.s.c)
	return "CREATE TABLE IF NOT EXISTS " + w.s.t.Limits + " (table_name " + name + " NOT NULL, queue " + text +
		" NOT NULL, scope " + scope + " NOT NULL, limit_key " + text + " NOT NULL, max_in_work INTEGER NOT NULL," +
		" PRIMARY KEY (table_name, queue, scope, limit_key))"
}

// CreateSlots is the statement that creates SlotsTable on c's database, if it is not there.
func CreateSlots(c *dialect.Caps) string {
	name, text, scope := keyTypes(c)
	return "CREATE TABLE IF NOT EXISTS " + SlotsTable + " (table_name " + name + " NOT NULL, queue " + text +
		" NOT NULL, scope " + scope + " NOT NULL, limit_key " + text + " NOT NULL, slot INTEGER NOT NULL," +
		" holder_id BIGINT NOT NULL, holder_token " + timeType(c) + " NOT NULL, PRIMARY KEY (table_name, queue, scope, limit_key, slot))"
}

// Check reads no row from the limits table and fails where it or one of its columns is
// missing.
func (w Limits) Check() Statement {
	return Statement{SQL: "SELECT table_name, queue, scope, limit_key, max_in_work FROM " + w.s.t.Limits + " WHERE 1 = 0"}
}

// CheckSlots reads no row from SlotsTable and fails where it or one of its columns is missing.
func CheckSlots() Statement {
	return Statement{SQL: "SELECT table_name, queue, scope, limit_key, slot, holder_id, holder_token FROM " + SlotsTable + " WHERE 1 = 0"}
}

// Set writes a limit, replacing the one of its queue, scope and key. It binds the job table's
// name, the queue, the scope, the key, then the limit.
func (w Limits) Set() Statement {
	p := w.s.Params()
	insert := "INSERT INTO " + w.s.t.Limits + " (table_name, queue, scope, limit_key, max_in_work) VALUES (" +
		p.Next(ArgTable) + ", " + p.Next(ArgQueue) + ", " + p.Next(ArgScope) + ", " + p.Next(ArgLimitKey) + ", " + p.Next(ArgLimit) + ")"
	if w.s.c.Catalog == dialect.MySQLCatalog {
		return p.statement(insert + " ON DUPLICATE KEY UPDATE max_in_work = VALUES(max_in_work)")
	}
	return p.statement(insert + " ON CONFLICT (table_name, queue, scope, limit_key) DO UPDATE SET max_in_work = EXCLUDED.max_in_work")
}

// Clear deletes a limit, where there is one. It binds the job table's name, the queue, the
// scope, then the key.
func (w Limits) Clear() Statement {
	p := w.s.Params()
	return p.statement("DELETE FROM " + w.s.t.Limits + " WHERE " + w.key(p, ""))
}

// List reads the job table's limits, in order of queue, scope and key, each with the number of
// its slots held (their holder's lease, in column lease (quoted), running ahead of now). It
// binds now, then the job table's name.
func (w Limits) List(lease string) Statement {
	p := w.s.Params()
	held := w.held(p, "inbox_limit", "COUNT(*)", lease)
	return p.statement("SELECT inbox_limit.queue, inbox_limit.scope, inbox_limit.limit_key, inbox_limit.max_in_work, (" +
		held + ") FROM " + w.s.t.Limits + " inbox_limit WHERE inbox_limit.table_name = " + p.Next(ArgTable) +
		" ORDER BY inbox_limit.queue, inbox_limit.scope, inbox_limit.limit_key")
}

// key is the predicate of alias's row (none: unprefixed) of the job table, a queue, a scope
// and a key. It binds the job table's name, the queue, the scope, then the key.
func (w Limits) key(p *Params, alias string) string {
	a := dotted(alias)
	return a + "table_name = " + p.Next(ArgTable) + " AND " + a + "queue = " + p.Next(ArgQueue) + " AND " + a + "scope = " +
		p.Next(ArgScope) + " AND " + a + "limit_key = " + p.Next(ArgLimitKey)
}

// held is a subquery of agg (COUNT(*), or a SUM) over the slots of limit alias whose holder's
// lease (column lease) runs ahead of now: the slots held. It binds now.
func (w Limits) held(p *Params, alias, agg, lease string) string {
	t := w.s.t
	return "SELECT " + agg + " FROM " + SlotsTable + " inbox_slot JOIN " + t.Name + " inbox_holder ON inbox_holder." + t.ID + " = inbox_slot.holder_id" +
		" WHERE inbox_slot.table_name = " + alias + ".table_name AND inbox_slot.queue = " + alias + ".queue AND inbox_slot.scope = " + alias +
		".scope AND inbox_slot.limit_key = " + alias + ".limit_key AND inbox_holder." + lease + " >= " + p.Next(ArgNow)
}

// limitFree is the claim's predicate, with the lease builder's column, of a row none of whose
// limits is full: no limit of the row's queue, of its kind (where the table has a kind column)
// or of its limit key (where it has a limit key column) counts as many held slots as it allows.
// A held slot numbered at or above the limit (left by rows claimed before the limit was
// lowered) counts as the whole limit, so that no claim takes a row under a lowered limit before
// every such row has finished: held slots above a limit only ever free, since no claim takes
// one, so a pick that reads none held reads what stays true. A NULL kind or key matches no
// limit. Being in the claim's WHERE, it is decided before the LIMIT, so that a full limit never
// fills a claim with rows it cannot take. It binds the job table's name, the queue (where the
// table has a queue column), then now.
func (l Lease) limitFree(p *Params) string {
	t := l.s.t
	w := Limits{l.s}
	table := p.Next(ArgTable)
	queue := "''"
	if t.Queue != "" {
		queue = p.Next(ArgQueue)
	}
	counted := "COALESCE(SUM(CASE WHEN inbox_slot.slot < inbox_limit.max_in_work THEN 1 ELSE inbox_limit.max_in_work END), 0)"
	return "NOT EXISTS (SELECT 1 FROM " + t.Limits + " inbox_limit WHERE inbox_limit.table_name = " + table + " AND inbox_limit.queue = " + queue +
		" AND " + l.s.limitsOver(t.Name) + " AND inbox_limit.max_in_work <= (" + w.held(p, "inbox_limit", counted, l.col) + "))"
}

// limitsOver is the predicate of the limits (alias inbox_limit) that count the row row (a table
// name or alias) of the job table: its queue's, its kind's where the table has a kind column,
// its limit key's where it has a limit key column.
func (s SQL) limitsOver(row string) string {
	t := s.t
	scopes := []string{"(inbox_limit.scope = '" + ScopeQueue + "' AND inbox_limit.limit_key = '')"}
	if t.Kind != "" {
		scopes = append(scopes, "(inbox_limit.scope = '"+ScopeKind+"' AND inbox_limit.limit_key = "+row+"."+t.Kind+")")
	}
	if t.LimitKey != "" {
		scopes = append(scopes, "(inbox_limit.scope = '"+ScopeKey+"' AND inbox_limit.limit_key = "+row+"."+t.LimitKey+")")
	}
	return "(" + strings.Join(scopes, " OR ") + ")"
}

// andLimitFree is " AND " and limitFree where the description names a limits table; empty
// otherwise.
func (l Lease) andLimitFree(p *Params) string {
	if !l.s.HasLimits() {
		return ""
	}
	return " AND " + l.limitFree(p)
}

// limitRead is the select list's tail, after Columns (and groupRead), of a pick where the table
// has a limit key column and limits or rates (ReadsLimitKey): the row's limit key, which the
// form takes a slot of. Empty otherwise.
func (l Lease) limitRead() string {
	if !l.s.ReadsLimitKey() {
		return ""
	}
	return ", " + l.s.t.Name + "." + l.s.t.LimitKey
}

// andLeaseRuns is " AND " and the predicate of a lease that has not run out by now, where the
// description names a limits table: an extension there keeps only a lease that still runs,
// since once it has run out a claim may have taken its row's slot for another row (a slot is
// held while its holder's lease runs), and extending it would put one row more in work than
// the limit. It binds now. Empty where there are no limits.
func (l Lease) andLeaseRuns(p *Params) string {
	if !l.s.HasLimits() {
		return ""
	}
	return " AND " + l.col + " >= " + p.Next(ArgNow)
}

// ReadSlots reads, in the claim's transaction, a limit and its slots: max_in_work, then for
// each slot its number, its holder, its holder's token and whether it is held (1: its holder's
// lease runs ahead of now; 0: free), in slot order; one row of NULL slot columns where the limit
// has no slot yet, and no row where there is no such limit. Held and free are read in the same
// statement as the holder and the token, so a slot whose holder and token are unchanged since
// is still free (an extension of a lease that ran out fails, andLeaseRuns). It binds now, the
// job table's name, the queue, the scope, then the key. Empty where there are no limits.
func (l Lease) ReadSlots() Statement {
	if !l.s.HasLimits() {
		return Statement{}
	}
	t, p := l.s.t, l.s.Params()
	heldNow := "CASE WHEN EXISTS (SELECT 1 FROM " + t.Name + " inbox_holder WHERE inbox_holder." + t.ID + " = inbox_slot.holder_id AND inbox_holder." +
		l.col + " >= " + p.Next(ArgNow) + ") THEN 1 ELSE 0 END"
	return p.statement("SELECT inbox_limit.max_in_work, inbox_slot.slot, inbox_slot.holder_id, inbox_slot.holder_token, " + heldNow +
		" FROM " + t.Limits + " inbox_limit LEFT JOIN " + SlotsTable + " inbox_slot ON inbox_slot.table_name = inbox_limit.table_name AND inbox_slot.queue = inbox_limit.queue" +
		" AND inbox_slot.scope = inbox_limit.scope AND inbox_slot.limit_key = inbox_limit.limit_key WHERE " + Limits{l.s}.key(p, "inbox_limit") +
		" ORDER BY inbox_slot.slot")
}

// TakeSlot takes a slot ReadSlots read free for the claimed row, where the slot is still what
// it read (its holder and token): one row changed, the row holds the slot; none, another claim
// took it since. It binds the row's id, the claim's token, the job table's name, the queue, the
// scope, the key, the slot, the holder read, then the token read. Empty where there are no
// limits.
func (l Lease) TakeSlot() Statement {
	if !l.s.HasLimits() {
		return Statement{}
	}
	p := l.s.Params()
	set := "UPDATE " + SlotsTable + " SET holder_id = " + p.Next(ArgID) + ", holder_token = " + p.Next(ArgLease)
	return p.statement(set + " WHERE " + Limits{l.s}.key(p, "") + " AND slot = " + p.Next(ArgSlot) + " AND holder_id = " + p.Next(ArgHolder) +
		" AND holder_token = " + p.Next(ArgToken))
}

// NewSlot takes a slot number no row of SlotsTable had when ReadSlots read the limit: an
// INSERT, which changes no row where another claim inserted the slot since (ON CONFLICT DO
// NOTHING on Postgres and SQLite, whose failed statement would end the transaction on
// Postgres) or fails with a duplicate key on the PRIMARY key (MySQL, MariaDB; never INSERT
// IGNORE, which would hide other errors too); the row is then not claimed by this slot. It
// binds the job table's name, the queue, the scope, the key, the slot, the row's id, then the
// claim's token. Empty where there are no limits.
func (l Lease) NewSlot() Statement {
	if !l.s.HasLimits() {
		return Statement{}
	}
	p := l.s.Params()
	insert := "INSERT INTO " + SlotsTable + " (table_name, queue, scope, limit_key, slot, holder_id, holder_token) VALUES (" + p.Next(ArgTable) + ", " +
		p.Next(ArgQueue) + ", " + p.Next(ArgScope) + ", " + p.Next(ArgLimitKey) + ", " + p.Next(ArgSlot) + ", " + p.Next(ArgID) + ", " + p.Next(ArgLease) + ")"
	if l.s.c.Catalog != dialect.MySQLCatalog {
		insert += " ON CONFLICT DO NOTHING"
	}
	return p.statement(insert)
}

// AnySlot reads one slot of the job table that the lease form holds by its holder's lease, if it
// has any: the probe before Stale, so that a table whose form keeps no such slot is never read
// for stale slots. The advisory form keeps no slot rows (its slots are locks); the row lock
// form's slot rows name holder 0 and are held by their row lock, which a removal would wait
// for; and the tables of either may have no lease column for Stale to read. It binds the job
// table's name.
func (w Limits) AnySlot() Statement {
	p := w.s.Params()
	return p.statement("SELECT slot FROM " + SlotsTable + " WHERE table_name = " + p.Next(ArgTable) + " AND holder_id <> 0 LIMIT 1")
}

// Stale reads, at most ArgLimit of them, the job table's slots that no claim needs and none
// holds: the lease form's slots (holder not 0, see AnySlot) of a limit no longer set, or
// numbered at or above its max_in_work (a lowered limit), whose holder's lease (column lease,
// quoted) does not run ahead of now. It reads each one's queue, scope, key, number, holder and
// token, which Drop then compares. It binds the job table's name, now, then the limit.
func (w Limits) Stale(lease string) Statement {
	p := w.s.Params()
	t := w.s.t
	table := p.Next(ArgTable) // first, in the text's order, for the databases of ? parameters
	held := "SELECT 1 FROM " + t.Name + " inbox_holder WHERE inbox_holder." + t.ID + " = inbox_slot.holder_id AND inbox_holder." + lease + " >= " + p.Next(ArgNow)
	needed := "SELECT 1 FROM " + w.s.t.Limits + " inbox_limit WHERE inbox_limit.table_name = inbox_slot.table_name AND inbox_limit.queue = inbox_slot.queue" +
		" AND inbox_limit.scope = inbox_slot.scope AND inbox_limit.limit_key = inbox_slot.limit_key AND inbox_slot.slot < inbox_limit.max_in_work"
	return p.statement("SELECT inbox_slot.queue, inbox_slot.scope, inbox_slot.limit_key, inbox_slot.slot, inbox_slot.holder_id, inbox_slot.holder_token FROM " +
		SlotsTable + " inbox_slot WHERE inbox_slot.table_name = " + table + " AND inbox_slot.holder_id <> 0 AND NOT EXISTS (" + held + ") AND NOT EXISTS (" + needed + ")" +
		" ORDER BY inbox_slot.queue, inbox_slot.scope, inbox_slot.limit_key, inbox_slot.slot LIMIT " + p.Next(ArgLimit))
}

// Drop deletes a slot Stale read, where its holder and token are still the ones read: one row
// deleted, or none where a claim took the slot since. A slot read free whose holder and token
// have not changed since is still free: a lease that ran out is never extended (andLeaseRuns),
// and a holder claimed again either took this slot back (a new token) or holds another slot of
// the limit under its new token, so this one counts it a second time. The comparison is of the
// slot's own columns, which the DELETE reads at their latest, locked, so a claim's take that
// commits while it waits is seen. It binds the job table's name, the queue, the scope, the
// key, the slot, the holder read, then the token read.
func (w Limits) Drop() Statement {
	p := w.s.Params()
	return p.statement("DELETE FROM " + SlotsTable + " WHERE " + w.key(p, "") + " AND slot = " + p.Next(ArgSlot) + " AND holder_id = " +
		p.Next(ArgHolder) + " AND holder_token = " + p.Next(ArgToken))
}
