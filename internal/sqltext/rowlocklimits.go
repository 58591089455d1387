package sqltext

import (
	"github.com/sqlinbox/inbox/dialect"
)

// Concurrency limits in the row lock form (inbox.Table.Limits). A row in work under a limit
// holds one of the limit's slots, a row of SlotsTable numbered below max_in_work, by a row lock
// taken FOR UPDATE SKIP LOCKED in the claim's own transaction (LockSlot): the slot is held
// exactly as long as the claimed row's lock, and frees with it at the settlement's commit, a
// rollback, or the end of a killed process's session. Nothing counts the rows in work and
// nothing sweeps; a limit changed at run time takes effect at the next claim, since a claim
// looks only at the slots numbered below the limit as it reads it. The form writes holder 0 and
// the time of the slot's insertion in the slot's holder columns, which the lease form fills.

// RowLimits reads, without locking, the limits a row is under (its queue's, its kind's where
// the table has a kind column, its limit key's where it has a limit key column): scope, key and
// max_in_work of each, the most specific first (key, kind, then queue). It binds the row's id,
// the job table's name, then the queue (where the table has a queue column).
func (r RowLock) RowLimits() Statement {
	t, p := r.s.t, r.s.Params()
	id := p.Next(ArgID)
	table := p.Next(ArgTable)
	queue := "''"
	if t.Queue != "" {
		queue = p.Next(ArgQueue)
	}
	specific := "CASE inbox_limit.scope WHEN '" + ScopeKey + "' THEN 0 WHEN '" + ScopeKind + "' THEN 1 ELSE 2 END"
	return p.statement("SELECT inbox_limit.scope, inbox_limit.limit_key, inbox_limit.max_in_work FROM " + t.Limits + " inbox_limit JOIN " + t.Name +
		" inbox_row ON inbox_row." + t.ID + " = " + id + " WHERE inbox_limit.table_name = " + table + " AND inbox_limit.queue = " + queue +
		" AND " + r.s.limitsOver("inbox_row") + " ORDER BY " + specific)
}

// slotKey is the predicate of the slots of one limit: it binds the job table's name, the queue
// (where the table has a queue column; ” otherwise), the scope, then the key.
func (r RowLock) slotKey(p *Params) string {
	queue := "''"
	table := p.Next(ArgTable)
	if r.s.t.Queue != "" {
		queue = p.Next(ArgQueue)
	}
	return SlotsTable + ".table_name = " + table + " AND " + SlotsTable + ".queue = " + queue + " AND " + SlotsTable + ".scope = " + p.Next(ArgScope) +
		" AND " + SlotsTable + ".limit_key = " + p.Next(ArgLimitKey)
}

// LockSlot takes, in the claim's transaction, one slot of a limit, by its number, locked FOR
// UPDATE SKIP LOCKED: no row, another transaction holds it (or it has no row yet: SlotsThere
// tells). One slot per statement, by the whole primary key: a range read of the slots would, at
// repeatable read on MySQL and MariaDB, lock the gap after the range too, and with it the next
// limit's first slot, which other claims would then skip as held. It binds the job table's name,
// the queue, the scope, the key, then the slot.
func (r RowLock) LockSlot() Statement {
	p := r.s.Params()
	return p.statement("SELECT slot FROM " + SlotsTable + " WHERE " + r.slotKey(p) + " AND slot = " + p.Next(ArgSlot) + " FOR UPDATE SKIP LOCKED")
}

// SlotsThere counts, without locking, the slots of a limit numbered below the limit that have
// their row. It binds the job table's name, the queue, the scope, the key, then the limit.
func (r RowLock) SlotsThere() Statement {
	p := r.s.Params()
	return p.statement("SELECT COUNT(*) FROM " + SlotsTable + " WHERE " + r.slotKey(p) + " AND slot < " + p.Next(ArgLimit))
}

// AddSlot inserts a slot's row, where it has none, in a statement of its own that commits at
// once, outside any claim's transaction (as AddGroup does, and for the same reasons: ON
// CONFLICT DO NOTHING on Postgres; a plain INSERT whose duplicate key means the row is there on
// MySQL and MariaDB). It binds the job table's name, the queue, the scope, the key, then the
// slot.
func (r RowLock) AddSlot() Statement {
	p := r.s.Params()
	table := p.Next(ArgTable)
	queue := "''"
	if r.s.t.Queue != "" {
		queue = p.Next(ArgQueue)
	}
	insert := "INSERT INTO " + SlotsTable + " (table_name, queue, scope, limit_key, slot, holder_id, holder_token) VALUES (" + table + ", " + queue + ", " +
		p.Next(ArgScope) + ", " + p.Next(ArgLimitKey) + ", " + p.Next(ArgSlot) + ", 0, " + databaseNow(r.s.c) + ")"
	if r.s.c.Catalog != dialect.MySQLCatalog {
		insert += " ON CONFLICT DO NOTHING"
	}
	return p.statement(insert)
}
