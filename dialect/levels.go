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

// levelName is the name of the marker L.
func levelName[L any]() string {
	var l L
	switch any(l).(type) {
	case isolation.ReadUncommitted:
		return "read uncommitted"
	case isolation.ReadCommitted:
		return "read committed"
	case isolation.RepeatableRead:
		return "repeatable read"
	case isolation.Serializable:
		return "serializable"
	case isolation.Deferred:
		return "deferred"
	case isolation.Immediate:
		return "immediate"
	case isolation.Exclusive:
		return "exclusive"
	}
	return "default"
}

// TxOptions returns the options a transaction of d's level begins with through
// database/sql: nil for Postgres at its default (a plain BEGIN), READ COMMITTED for MySQL and
// MariaDB at theirs, the declared level otherwise. It serves a form that must begin on a
// connection it already holds (*sql.Conn.BeginTx) rather than through d.Begin. SQLite modes
// have no TxOptions: it returns nil for them.
func TxOptions(d Dialect) *sql.TxOptions {
	if d.Name() == "sqlite" {
		return nil
	}
	return txOptions(d.Level(), d.Name() != "postgres")
}

// txOptions maps a level name to the options database/sql begins with; mysqlFamily turns the
// default into READ COMMITTED.
func txOptions(level string, mysqlFamily bool) *sql.TxOptions {
	switch level {
	case "read uncommitted":
		return &sql.TxOptions{Isolation: sql.LevelReadUncommitted}
	case "read committed":
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	case "repeatable read":
		return &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
	case "serializable":
		return &sql.TxOptions{Isolation: sql.LevelSerializable}
	}
	if mysqlFamily {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}

// sqliteBegin maps a SQLite mode name to its BEGIN statement.
func sqliteBegin(mode string) string {
	switch mode {
	case "deferred":
		return "BEGIN DEFERRED"
	case "immediate":
		return "BEGIN IMMEDIATE"
	case "exclusive":
		return "BEGIN EXCLUSIVE"
	}
	return "BEGIN"
}
