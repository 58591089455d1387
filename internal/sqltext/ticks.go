package sqltext

import "github.com/sqlinbox/inbox/dialect"

// The roles of the ticks table's parameters (Ticks).
const (
	ArgSchedule Arg = "schedule" // a schedule's name
	ArgTick     Arg = "tick"     // a tick, in microseconds since the Unix epoch
	ArgNext     Arg = "next"     // the tick after it, in microseconds since the Unix epoch
	ArgLast     Arg = "last"     // the last tick the process read, which must still hold
)

// Ticks builds the statements of a table's periodic jobs over its ticks table: one row per
// schedule, its name, the last tick taken and the next one planned (each in microseconds since
// the Unix epoch, 0 for none), and the id of the last tick's job (0 for none). A tick is taken by
// a compare-and-set of the last tick (Take), in the transaction that publishes its job.
type Ticks struct {
	s     SQL
	ticks string // the ticks table's name, quoted
}

// Ticks returns the builder of the statements over ticks, the quoted name of the ticks table of
// s's table.
func (s SQL) Ticks(ticks string) Ticks { return Ticks{s: s, ticks: ticks} }

// tickColumns is the ticks table's columns, in the order Probe and List read them.
const tickColumns = "name, last_tick, next_tick, job_id"

// Create is the CREATE TABLE of the ticks table. The name is the primary key: on MySQL and
// MariaDB 191 characters, the longest a utf8mb4 key holds on every row format, compared byte for
// byte (KeyText): "Nightly" and "nightly" are two schedules.
func (k Ticks) Create() string {
	name := "TEXT"
	if k.s.c.Catalog == dialect.MySQLCatalog {
		name = KeyText(k.s.c, 191)
	}
	integer := "BIGINT"
	if k.s.c.Catalog == dialect.SQLiteCatalog {
		integer = "INTEGER"
	}
	return "CREATE TABLE " + k.ticks + " (name " + name + " NOT NULL PRIMARY KEY, " +
		"last_tick " + integer + " NOT NULL DEFAULT 0, next_tick " + integer + " NOT NULL DEFAULT 0, job_id " + integer + " NOT NULL DEFAULT 0)"
}

// Probe reads no row, and fails where the ticks table or one of its columns is missing.
func (k Ticks) Probe() Statement {
	return Statement{SQL: "SELECT " + tickColumns + " FROM " + k.ticks + " WHERE 1 = 0"}
}

// List reads every schedule's row, by name.
func (k Ticks) List() Statement {
	return Statement{SQL: "SELECT " + tickColumns + " FROM " + k.ticks + " ORDER BY name"}
}

// Read reads one schedule's last tick, next tick and job id.
func (k Ticks) Read() Statement {
	p := k.s.Params()
	return p.statement("SELECT last_tick, next_tick, job_id FROM " + k.ticks + " WHERE name = " + p.Next(ArgSchedule))
}

// Add records a schedule that has no row yet, with its first tick planned and none taken. Two
// processes that add it at once collide on the primary key: the loser's error is harmless, and
// its caller reads the row the winner wrote.
func (k Ticks) Add() Statement {
	p := k.s.Params()
	return p.statement("INSERT INTO " + k.ticks + " (name, next_tick) VALUES (" + p.Next(ArgSchedule) + ", " + p.Next(ArgNext) + ")")
}

// Take takes a tick: it moves a schedule's last tick from the one the process read to a later
// one, and plans the next, where no other process moved it meanwhile; it changes one row, or
// none where another process took the tick first. Its UPDATE locks the row until the
// transaction ends, so a second taker waits for the first and then finds the last tick moved.
func (k Ticks) Take() Statement {
	p := k.s.Params()
	set := "last_tick = " + p.Next(ArgTick) + ", next_tick = " + p.Next(ArgNext)
	return p.statement("UPDATE " + k.ticks + " SET " + set + " WHERE name = " + p.Next(ArgSchedule) + " AND last_tick = " + p.Next(ArgLast))
}

// SetJob records the id of the job of the tick its transaction took.
func (k Ticks) SetJob() Statement {
	p := k.s.Params()
	return p.statement("UPDATE " + k.ticks + " SET job_id = " + p.Next(ArgID) + " WHERE name = " + p.Next(ArgSchedule))
}

// Live counts the job table's rows of an id that are neither processed nor dead: 1 while the
// job is queued or in work, 0 once it settled (or its row was deleted). It reads without a lock,
// so it never waits behind a row in work; a row the row lock form holds reads as live.
func (k Ticks) Live() Statement {
	t := k.s.t
	p := k.s.Params()
	where := t.ID + " = " + p.Next(ArgID)
	for _, c := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
		if c != "" {
			where += " AND " + c + " IS NULL"
		}
	}
	return p.statement("SELECT COUNT(*) FROM " + t.Name + " WHERE " + where)
}
