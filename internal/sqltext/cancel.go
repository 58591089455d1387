package sqltext

import (
	"strings"

	"github.com/sqlinbox/inbox/dialect"
)

// CancelsTable is the table that holds the cancel requests of rows in work (inbox.Cancel): one
// row per job table and id, the request's time. A consumer of a table with a cancelled_at
// column reads it for the rows it holds, cancels their handlers, and deletes the requests whose
// row has settled or is queued again.
const CancelsTable = "inbox_cancels"

// CreateCancels is the statement that creates CancelsTable on c's database, if it is not there;
// its table names compare byte for byte (KeyText).
func CreateCancels(c *dialect.Caps) string {
	key, at := "TEXT", "TIMESTAMPTZ"
	switch c.Catalog {
	case dialect.MySQLCatalog:
		key, at = KeyText(c, 191), "DATETIME(6)"
	case dialect.SQLiteCatalog:
		at = "TEXT"
	}
	return "CREATE TABLE IF NOT EXISTS " + CancelsTable + " (table_name " + key + " NOT NULL, id BIGINT NOT NULL, requested_at " + at +
		" NOT NULL, PRIMARY KEY (table_name, id))"
}

// Cancels builds the statements that cancel rows by id (inbox.Cancel) and those a consumer runs
// to tell its handlers and apply the requests (every inbox.Config.CancelPoll). A row is queued where it is pending
// (neither processed, dead nor cancelled) and held by no lease running ahead nor, where the
// database has row locks, by a transaction's lock. None of them waits for a lock a consumer
// holds: Lock skips a locked row, and the others read without locking or write CancelsTable and
// rows no claim holds. They need the table's cancelled_at column.
type Cancels struct {
	s     SQL
	lease string // the lease form's column, quoted; empty for a table without one
}

// Cancels returns the builder of the cancel's statements; lease is the lease form's column,
// quoted, or empty.
func (s SQL) Cancels(lease string) Cancels { return Cancels{s: s, lease: lease} }

// pending are the conditions of a row that is neither processed, dead nor cancelled.
func (c Cancels) pending(prefix string) []string {
	t := c.s.t
	var conds []string
	for _, col := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
		if col != "" {
			conds = append(conds, prefix+col+" IS NULL")
		}
	}
	return conds
}

// queued are the conditions of a queued row of the id bound: its id, pending, and no lease
// ahead. It binds the id, then now where the table has a lease column.
func (c Cancels) queued(p *Params) string {
	t := c.s.t
	conds := append([]string{t.ID + " = " + p.Next(ArgID)}, c.pending("")...)
	if c.lease != "" {
		conds = append(conds, "("+c.lease+" IS NULL OR "+c.lease+" < "+p.Next(ArgNow)+")")
	}
	return strings.Join(conds, " AND ")
}

// Lock locks the row of the id bound where it is queued and no transaction holds it (SKIP
// LOCKED), and reads its id: no row where it is not. For the databases with row locks
// (Caps.SkipLocked). It binds the id, then now (where the table has a lease column).
func (c Cancels) Lock() Statement {
	t, p := c.s.t, c.s.Params()
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + c.queued(p) + " FOR UPDATE SKIP LOCKED")
}

// Stamp cancels the row of the id bound where it is queued: SET cancelled_at, and clears its
// unique key where the table has one (in every scope: a cancelled job frees its key at once). It
// runs after Lock in its transaction, or alone on a database of one writer (SQLite), whose
// statements hold no row. It binds the time, the id, then now (where the table has a lease
// column).
func (c Cancels) Stamp() Statement {
	t, p := c.s.t, c.s.Params()
	head := "UPDATE " + t.Name + " SET " + t.CancelledAt + " = " + p.Next(ArgAt)
	if t.UniqueKey != "" {
		head += ", " + t.UniqueKey + " = NULL"
	}
	return p.statement(head + " WHERE " + c.queued(p))
}

// The states State reads.
const (
	StatePending   = 0 // neither processed, dead nor cancelled: queued or in work
	StateProcessed = 1
	StateDead      = 2
	StateCancelled = 3
)

// State reads, without a lock, the state of the row of the id bound: StateProcessed,
// StateDead, StateCancelled or StatePending, in that order of precedence (a processed row
// stamped cancelled_at was asked to be cancelled after it succeeded); no row where there is
// none of that id. It binds the id.
func (c Cancels) State() Statement {
	t, p := c.s.t, c.s.Params()
	state := "CASE"
	for _, w := range []struct {
		col   string
		state string
	}{{t.ProcessedAt, "1"}, {t.DeadAt, "2"}, {t.CancelledAt, "3"}} {
		if w.col != "" {
			state += " WHEN " + w.col + " IS NOT NULL THEN " + w.state
		}
	}
	state += " ELSE 0 END"
	return p.statement("SELECT " + state + " FROM " + t.Name + " WHERE " + t.ID + " = " + p.Next(ArgID))
}

// Request records the cancel request of a row in work, or keeps the one recorded. It binds the
// job table's name, the id, then the request's time.
func (c Cancels) Request() Statement {
	p := c.s.Params()
	q := "INSERT INTO " + CancelsTable + " (table_name, id, requested_at) VALUES (" + p.Next(ArgTable) + ", " + p.Next(ArgID) + ", " + p.Next(ArgAt) + ")"
	if c.s.c.Catalog == dialect.MySQLCatalog {
		return p.statement(q + " ON DUPLICATE KEY UPDATE id = id")
	}
	return p.statement(q + " ON CONFLICT (table_name, id) DO NOTHING")
}

// Asked reads which of n rows a consumer holds were asked to be cancelled: stamped cancelled_at
// (the advisory form's rows, which Cancel sees as queued) or with a request in CancelsTable. It
// reads without locking. It binds n ids, then the job table's name.
func (c Cancels) Asked(n int) Statement {
	t, p := c.s.t, c.s.Params()
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + t.ID + " IN (" + p.listOf(ArgID, n) + ") AND (" +
		t.CancelledAt + " IS NOT NULL OR " + t.ID + " IN (SELECT id FROM " + CancelsTable + " WHERE table_name = " + p.Next(ArgTable) + "))")
}

// Requests reads, without locking, the ids of the table's requests. A consumer applies each
// (inbox.Config.CancelPoll): it tells the handler of a row it holds; it cancels a row queued
// again; it deletes the request of a row settled, or gone. It binds the job table's name.
func (c Cancels) Requests() Statement {
	p := c.s.Params()
	return p.statement("SELECT id FROM " + CancelsTable + " WHERE table_name = " + p.Next(ArgTable))
}

// Noted stamps a processed row's cancelled_at with the time of its request, where it has none:
// the row says that a cancel was asked after its handler had succeeded. A request whose row is
// processed is noted so before Forget deletes it. It binds the job table's name, then the id. It is empty
// where the table has no processed_at column (an Ack deletes the row).
func (c Cancels) Noted() Statement {
	t, p := c.s.t, c.s.Params()
	if t.ProcessedAt == "" {
		return Statement{}
	}
	return p.statement("UPDATE " + t.Name + " SET " + t.CancelledAt + " = (SELECT r.requested_at FROM " + CancelsTable +
		" r WHERE r.table_name = " + p.Next(ArgTable) + " AND r.id = " + t.Name + "." + t.ID + ") WHERE " + t.ID + " = " + p.Next(ArgID) +
		" AND " + t.ProcessedAt + " IS NOT NULL AND " + t.CancelledAt + " IS NULL")
}

// Forget deletes a request. It binds the job table's name, then the id.
func (c Cancels) Forget() Statement {
	p := c.s.Params()
	return p.statement("DELETE FROM " + CancelsTable + " WHERE table_name = " + p.Next(ArgTable) + " AND id = " + p.Next(ArgID))
}

// Check reads nothing from CancelsTable and fails where it or one of its columns is missing. It
// binds nothing.
func (c Cancels) Check() Statement {
	return Statement{SQL: "SELECT table_name, id, requested_at FROM " + CancelsTable + " WHERE 1 = 0"}
}
