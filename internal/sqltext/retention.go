package sqltext

import (
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/dialect"
)

// SweepsTable is the table that holds each job table's sweeper lease (inbox.Retention): one
// row per job table, its name, the holder's name and the end of its lease on the database's
// clock.
const SweepsTable = "inbox_sweeps"

// CreateSweeps is the statement that creates SweepsTable on c's database, if it is not there.
func CreateSweeps(c *dialect.Caps) string {
	key, holder, until := "TEXT", "TEXT", "TIMESTAMPTZ"
	switch c.Catalog {
	case dialect.MySQLCatalog:
		key, holder, until = KeyText(c, 191), "VARCHAR(191)", "DATETIME(6)"
	case dialect.SQLiteCatalog:
		until = "TEXT"
	}
	return "CREATE TABLE IF NOT EXISTS " + SweepsTable + " (table_name " + key + " PRIMARY KEY, holder " + holder + " NOT NULL, locked_until " + until + " NOT NULL)"
}

// Sweeps builds the statements of the sweeper lease over SweepsTable. Every time they write or
// compare is the database's own clock, so that sweepers on hosts whose clocks disagree agree on
// who holds the lease; a duration is bound in microseconds (ArgFor).
type Sweeps struct{ c *dialect.Caps }

// SweepLease returns the builder of the sweeper lease's statements on c's database.
func SweepLease(c *dialect.Caps) Sweeps { return Sweeps{c} }

func (w Sweeps) params() *Params { return &Params{numbered: w.c.NumberedParams} }

// now is the database's clock, as the lease column stores it.
func (w Sweeps) now() string { return databaseNow(w.c) }

// databaseNow is the database's clock, as a timestamp column of the side tables (SweepsTable,
// the pauses table) stores it.
func databaseNow(c *dialect.Caps) string {
	switch c.Catalog {
	case dialect.PostgresCatalog:
		return "now()"
	case dialect.MySQLCatalog:
		return "UTC_TIMESTAMP(6)"
	}
	return "strftime('%Y-%m-%d %H:%M:%f', 'now')"
}

// after is the database's clock plus a duration of microseconds bound at p.
func (w Sweeps) after(p *Params) string {
	switch w.c.Catalog {
	case dialect.PostgresCatalog:
		return "now() + " + p.Next(ArgFor) + " * INTERVAL '1 microsecond'"
	case dialect.MySQLCatalog:
		return "UTC_TIMESTAMP(6) + INTERVAL " + p.Next(ArgFor) + " MICROSECOND"
	}
	return "strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (" + p.Next(ArgFor) + " / 1000000.0) || ' seconds')"
}

// Check reads nothing from SweepsTable and fails where it or one of its columns is missing. It
// binds nothing.
func (w Sweeps) Check() Statement {
	return Statement{SQL: "SELECT table_name, holder, locked_until FROM " + SweepsTable + " WHERE 1 = 0"}
}

// Ensure writes a job table's row, free, where there is none. It binds the job table's name.
func (w Sweeps) Ensure() Statement {
	p := w.params()
	q := "INSERT INTO " + SweepsTable + " (table_name, holder, locked_until) VALUES (" + p.Next(ArgTable) + ", '', " + w.now() + ")"
	if w.c.Catalog == dialect.MySQLCatalog {
		return p.statement(q + " ON DUPLICATE KEY UPDATE table_name = table_name")
	}
	return p.statement(q + " ON CONFLICT (table_name) DO NOTHING")
}

// Take takes a job table's lease for a holder where it has run out (compare and set: it
// changes one row or none). It binds the holder, the lease's length, the job table's name.
func (w Sweeps) Take() Statement {
	p := w.params()
	return p.statement("UPDATE " + SweepsTable + " SET holder = " + p.Next(ArgHolder) + ", locked_until = " + w.after(p) +
		" WHERE table_name = " + p.Next(ArgTable) + " AND locked_until <= " + w.now())
}

// Renew extends a lease its holder still holds (it changes one row or none). It binds the
// lease's length, the job table's name, the holder.
func (w Sweeps) Renew() Statement {
	p := w.params()
	return p.statement("UPDATE " + SweepsTable + " SET locked_until = " + w.after(p) +
		" WHERE table_name = " + p.Next(ArgTable) + " AND holder = " + p.Next(ArgHolder) + " AND locked_until > " + w.now())
}

// Leave ends a pass: the lease runs out after a duration, the time before the next pass by
// any sweeper (zero: at once). It changes nothing where another holder took the lease. It binds
// the duration, the job table's name, the holder.
func (w Sweeps) Leave() Statement {
	p := w.params()
	return p.statement("UPDATE " + SweepsTable + " SET locked_until = " + w.after(p) +
		" WHERE table_name = " + p.Next(ArgTable) + " AND holder = " + p.Next(ArgHolder))
}

// Expiry says which settled rows retention deletes: those processed before one time, dead
// before another, cancelled before a third, each where it is asked for and the table has the column.
type Expiry struct {
	Processed bool // rows stamped processed_at before ArgProcessedBefore
	Dead      bool // rows stamped dead_at before ArgDeadBefore
	Cancelled bool // rows stamped cancelled_at before ArgCancelledBefore, and not processed
}

// expired is the predicate of a row retention deletes: settled before its cutoff. It is the
// one place that says so: a settled row retention must keep (a unique key still within its
// window after settling, a cancelled row's own cutoff) is a condition added here. Only settled
// rows match, and no form holds a settled row: a settlement's stamp commits as its hold ends.
func (s SQL) expired(p *Params, e Expiry) string {
	var or []string
	if e.Processed && s.t.ProcessedAt != "" {
		or = append(or, s.t.ProcessedAt+" < "+p.Next(ArgProcessedBefore))
	}
	if e.Dead && s.t.DeadAt != "" {
		or = append(or, s.t.DeadAt+" < "+p.Next(ArgDeadBefore))
	}
	if e.Cancelled && s.t.CancelledAt != "" {
		// A processed row stamped cancelled_at was asked to be cancelled after it succeeded: it
		// keeps to the processed rows' age.
		cancelled := s.t.CancelledAt + " < " + p.Next(ArgCancelledBefore)
		if s.t.ProcessedAt != "" {
			cancelled = "(" + cancelled + " AND " + s.t.ProcessedAt + " IS NULL)"
		}
		or = append(or, cancelled)
	}
	switch len(or) {
	case 0:
		return "1 = 0"
	case 1:
		return or[0]
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

// Purge deletes at most limit expired rows, lowest ids first, in one statement, where the
// database's DELETE can: on Postgres over the rows a SELECT … FOR UPDATE SKIP LOCKED picks, so
// that it never waits for a row another transaction holds; on SQLite (one writer, no row
// locks) over a plain SELECT. Empty on MySQL and MariaDB, whose DELETE cannot read its own
// table in a subquery: there PurgePick and PurgeID run in one transaction. It binds the
// cutoffs Expiry asks for.
func (s SQL) Purge(e Expiry, limit int) Statement {
	if s.c.Catalog == dialect.MySQLCatalog {
		return Statement{}
	}
	p, t := s.Params(), s.t
	q := "SELECT " + t.ID + " FROM " + t.Name + " WHERE " + s.expired(p, e) + " ORDER BY " + t.ID + " LIMIT " + strconv.Itoa(limit)
	if s.c.SkipLocked {
		q += " FOR UPDATE SKIP LOCKED"
	}
	return p.statement("DELETE FROM " + t.Name + " WHERE " + t.ID + " IN (" + q + ")")
}

// PurgePick locks at most limit expired rows, lowest ids first, passing over rows other
// transactions lock: MySQL's and MariaDB's first step of a purge (see Purge). It binds the
// cutoffs Expiry asks for.
func (s SQL) PurgePick(e Expiry, limit int) Statement {
	p, t := s.Params(), s.t
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + s.expired(p, e) + " ORDER BY " + t.ID + " LIMIT " + strconv.Itoa(limit) + " FOR UPDATE SKIP LOCKED")
}

// PurgeID deletes one row PurgePick locked, by its id: MySQL's and MariaDB's second step of a
// purge, a statement per row, since InnoDB may take an id IN (…) list through a scan that locks
// every row it reads and waits for the rows other transactions hold (see
// dialect.Caps.IDListSettles). It binds the id.
func (s SQL) PurgeID() Statement {
	p, t := s.Params(), s.t
	return p.statement("DELETE FROM " + t.Name + " WHERE " + t.ID + " = " + p.Next(ArgID))
}
