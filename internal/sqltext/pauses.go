package sqltext

import "github.com/sqlinbox/inbox/dialect"

// Pauses builds the statements over a description's pauses table (inbox.Table.Pauses): one row
// per paused queue, keyed by the job table's name as described and the queue's name, with the
// time it was paused on the database's clock. A queue is paused while its row exists, so a
// pause and a resume are a write of one row each and the claims' predicate (notPaused) reads
// one row of the primary key. Where the job table has no queue column its one queue is paused
// under the empty name.
type Pauses struct{ s SQL }

// Pauses returns the builder of the statements over the description's pauses table; its
// statements are meaningless where the description names none.
func (s SQL) Pauses() Pauses { return Pauses{s} }

// pauseColumns is the pauses table's columns, in the order Check reads them.
const pauseColumns = "table_name, queue_name, paused_at"

// Create is the statement that creates the pauses table, if it is not there. Its key is the
// job table's name and the queue's: 191 characters each on MySQL and MariaDB, whose utf8mb4 index
// holds both, compared byte for byte (KeyText).
func (w Pauses) Create() string {
	name, at := "TEXT", "TIMESTAMPTZ"
	switch w.s.c.Catalog {
	case dialect.MySQLCatalog:
		name, at = KeyText(w.s.c, 191), "DATETIME(6)"
	case dialect.SQLiteCatalog:
		at = "TEXT"
	}
	return "CREATE TABLE IF NOT EXISTS " + w.s.t.Pauses + " (table_name " + name + " NOT NULL, queue_name " + name +
		" NOT NULL, paused_at " + at + " NOT NULL, PRIMARY KEY (table_name, queue_name))"
}

// Check reads no row from the pauses table and fails where it or one of its columns is
// missing. It binds nothing.
func (w Pauses) Check() Statement {
	return Statement{SQL: "SELECT " + pauseColumns + " FROM " + w.s.t.Pauses + " WHERE 1 = 0"}
}

// Pause writes a queue's row, stamped with the database's clock, where there is none: pausing
// a paused queue changes nothing and keeps the time of its first pause. It binds the job
// table's name, then the queue's.
func (w Pauses) Pause() Statement {
	p := w.s.Params()
	q := "INSERT INTO " + w.s.t.Pauses + " (" + pauseColumns + ") VALUES (" + p.Next(ArgTable) + ", " + p.Next(ArgQueue) + ", " + databaseNow(w.s.c) + ")"
	if w.s.c.Catalog == dialect.MySQLCatalog {
		return p.statement(q + " ON DUPLICATE KEY UPDATE table_name = table_name")
	}
	return p.statement(q + " ON CONFLICT (table_name, queue_name) DO NOTHING")
}

// Resume deletes a queue's row, where there is one. It binds the job table's name, then the
// queue's.
func (w Pauses) Resume() Statement {
	p := w.s.Params()
	return p.statement("DELETE FROM " + w.s.t.Pauses + " WHERE table_name = " + p.Next(ArgTable) + " AND queue_name = " + p.Next(ArgQueue))
}

// ResumeNotifying is Resume that also notifies the job table's channel on Postgres (Notifying),
// at its commit, so that consumers elsewhere that listen claim at once. It binds Resume's
// arguments, then the channel.
func (w Pauses) ResumeNotifying() Statement {
	p := w.s.Params()
	del := "DELETE FROM " + w.s.t.Pauses + " WHERE table_name = " + p.Next(ArgTable) + " AND queue_name = " + p.Next(ArgQueue)
	return p.statement(Notifying(del, p.Next(ArgChannel)))
}

// Since reads when a queue was paused: no row where it is not. It binds the job table's name,
// then the queue's.
func (w Pauses) Since() Statement {
	p := w.s.Params()
	return p.statement("SELECT paused_at FROM " + w.s.t.Pauses + " WHERE table_name = " + p.Next(ArgTable) + " AND queue_name = " + p.Next(ArgQueue))
}

// List reads the job table's paused queues, by name: the queue's name and the time it was
// paused. It binds the job table's name.
func (w Pauses) List() Statement {
	p := w.s.Params()
	return p.statement("SELECT queue_name, paused_at FROM " + w.s.t.Pauses + " WHERE table_name = " + p.Next(ArgTable) + " ORDER BY queue_name")
}

// notPaused is the claims' predicate of a row whose queue is not paused: no row of the pauses
// table names the job table and the queue. It does not refer to the claimed row (the claim's
// queue is bound, and a table without a queue column is paused under the empty name), so the
// database reads it once per statement, one probe of the primary key, whatever the rows the
// claim considers. It binds the job table's name, then (where the table has a queue column)
// the queue's.
func (w Pauses) notPaused(p *Params) string {
	queue := "''"
	table := p.Next(ArgTable)
	if w.s.t.Queue != "" {
		queue = p.Next(ArgQueue)
	}
	return "NOT EXISTS (SELECT 1 FROM " + w.s.t.Pauses + " WHERE table_name = " + table + " AND queue_name = " + queue + ")"
}
