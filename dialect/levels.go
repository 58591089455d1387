package dialect

import (
	"database/sql"

	"github.com/sqlinbox/inbox/isolation"
)

// PostgresOpens is the set of levels Postgres opens. It runs READ UNCOMMITTED as READ
// COMMITTED, so it does not open it.
type PostgresOpens interface {
	isolation.Default | isolation.ReadCommitted | isolation.RepeatableRead | isolation.Serializable
}

// MySQLOpens is the set of levels MySQL and MariaDB open.
type MySQLOpens interface {
	isolation.Default | isolation.ReadUncommitted | isolation.ReadCommitted | isolation.RepeatableRead | isolation.Serializable
}

// SQLiteOpens is the set of modes SQLite opens. SQLite runs every transaction serializable; the
// mode decides when a transaction takes the write lock.
type SQLiteOpens interface {
	isolation.Default | isolation.Deferred | isolation.Immediate | isolation.Exclusive
}

// Level is the isolation level, or on SQLite the transaction mode, a dialect declares: the
// value of its marker (Dialect.Level). It prints as the level's name.
type Level string

// The levels and modes, one per marker of package isolation.
const (
	LevelDefault         Level = "default"
	LevelReadUncommitted Level = "read uncommitted"
	LevelReadCommitted   Level = "read committed"
	LevelRepeatableRead  Level = "repeatable read"
	LevelSerializable    Level = "serializable"
	LevelDeferred        Level = "deferred"
	LevelImmediate       Level = "immediate"
	LevelExclusive       Level = "exclusive"
)

// levelOf is the level of the marker L.
func levelOf[L any]() Level {
	var l L
	switch any(l).(type) {
	case isolation.ReadUncommitted:
		return LevelReadUncommitted
	case isolation.ReadCommitted:
		return LevelReadCommitted
	case isolation.RepeatableRead:
		return LevelRepeatableRead
	case isolation.Serializable:
		return LevelSerializable
	case isolation.Deferred:
		return LevelDeferred
	case isolation.Immediate:
		return LevelImmediate
	case isolation.Exclusive:
		return LevelExclusive
	}
	return LevelDefault
}

// TxOptions returns the options a transaction of d's level begins with through
// database/sql: nil for Postgres at its default (a plain BEGIN), READ COMMITTED for MySQL and
// MariaDB at theirs, the declared level otherwise. On MySQL and MariaDB, BeginOn and d.Begin
// begin with none where the connection's session already runs at the level. SQLite modes have
// no TxOptions: it returns nil for them.
func TxOptions(d Dialect) *sql.TxOptions {
	c := d.Caps()
	if c.BeginsByStatement {
		return nil
	}
	return txOptions(d.Level(), c.DefaultReadCommitted)
}

// txOptions maps a level to the options database/sql begins with; defaultReadCommitted turns
// the default into READ COMMITTED (Caps.DefaultReadCommitted).
func txOptions(level Level, defaultReadCommitted bool) *sql.TxOptions {
	switch level {
	case LevelReadUncommitted:
		return &sql.TxOptions{Isolation: sql.LevelReadUncommitted}
	case LevelReadCommitted:
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	case LevelRepeatableRead:
		return &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
	case LevelSerializable:
		return &sql.TxOptions{Isolation: sql.LevelSerializable}
	}
	if defaultReadCommitted {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}

// sqliteBegin maps a SQLite mode to its BEGIN statement.
func sqliteBegin(mode Level) string {
	switch mode {
	case LevelDeferred:
		return "BEGIN DEFERRED"
	case LevelImmediate:
		return "BEGIN IMMEDIATE"
	case LevelExclusive:
		return "BEGIN EXCLUSIVE"
	}
	return "BEGIN"
}
