package dialect

import (
	"context"
	"database/sql"
	"strings"

	"github.com/sqlinbox/inbox/isolation"
)

// Runtime is a dialect chosen at run time, from a live connection (Detect) or from
// configuration (Parse). It compiles with every form; the pairs the compiler checks for the
// typed dialects are checked when the consumer starts instead, and a pair the database cannot
// run fails there with an error wrapping inbox.ErrDialect.
type Runtime struct {
	Dialect
}

// Allows refuses a form whose capability the database lacks: the row lock form without SKIP
// LOCKED (Caps.SkipLocked), the advisory form without session locks (Caps.Locks): both on
// SQLite.
func (r Runtime) Allows(form Form) error {
	c := r.Caps()
	switch {
	case form == RowLockForm && !c.SkipLocked:
		return dialectError("the rowlock form does not run on %s (level %s), which has no row locks to skip (SELECT … FOR UPDATE SKIP LOCKED): use the lease form", c.Title, r.Level())
	case form == AdvisoryForm && c.Locks == NoSessionLocks:
		return dialectError("the advisory form does not run on %s (level %s), which has no session locks: use the lease form", c.Title, r.Level())
	}
	return nil
}

// RowLocks lets the row lock form compile with a Runtime dialect; Allows checks it at startup.
func (Runtime) RowLocks() SkipLocked { return SkipLocked{} }

// SessionLocks lets the advisory form compile with a Runtime dialect; Allows checks it at
// startup.
func (Runtime) SessionLocks() AdvisoryLocks { return AdvisoryLocks{} }

// Detect recognises the database behind db from the live connection: Postgres and MySQL answer
// SELECT VERSION() (MariaDB's answer names it), SQLite answers SELECT sqlite_version(). The
// dialect it returns opens transactions at the default level.
func Detect(ctx context.Context, db *sql.DB) (Runtime, error) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err == nil {
		switch lower := strings.ToLower(version); {
		case strings.Contains(lower, "postgresql"):
			return Runtime{Postgres[isolation.Default]{}}, nil
		case strings.Contains(lower, "mariadb"):
			return Runtime{MariaDB[isolation.Default]{}}, nil
		default:
			return Runtime{MySQL[isolation.Default]{}}, nil
		}
	}
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version); err == nil {
		return Runtime{SQLite[isolation.Default]{}}, nil
	}
	if err := db.PingContext(ctx); err != nil {
		return Runtime{}, dialectError("detecting the database: %v", err)
	}
	return Runtime{}, dialectError("the database answers neither SELECT VERSION() nor SELECT sqlite_version(): name the dialect with dialect.Parse")
}

// Parse returns the dialect a name and a level describe, as configuration gives them: name is
// postgres, mysql, mariadb or sqlite; level is empty or "default", an isolation level ("read
// committed" or "read_committed", …) or a SQLite mode ("immediate", …). A level the database does
// not open is an error wrapping inbox.ErrDialect that names both.
func Parse(name, level string) (Runtime, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	level = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(level)), "_", " ")
	if level == "" {
		level = "default"
	}
	var db string // as the dialects' Name gives it
	switch name {
	case "postgres", "postgresql", "pgx":
		db = "postgres"
	case "mysql", "mariadb":
		db = name
	case "sqlite", "sqlite3":
		db = "sqlite"
	default:
		return Runtime{}, dialectError("unknown database %q: name postgres, mysql, mariadb or sqlite", name)
	}
	for _, d := range parsed {
		if d.Name() == db && string(d.Level()) == level {
			return Runtime{d}, nil
		}
	}
	return Runtime{}, dialectError("%s does not open level %q: %s", name, level, opensHint(name))
}

// parsed are the dialects Parse chooses from, by their Name and Level: each database's type at
// every level it opens, a line a database (a generic type is instantiated only where the source
// writes its type argument, so each stands here).
var parsed = []Dialect{
	Postgres[isolation.Default]{}, Postgres[isolation.ReadCommitted]{}, Postgres[isolation.RepeatableRead]{}, Postgres[isolation.Serializable]{},
	MySQL[isolation.Default]{}, MySQL[isolation.ReadUncommitted]{}, MySQL[isolation.ReadCommitted]{}, MySQL[isolation.RepeatableRead]{}, MySQL[isolation.Serializable]{},
	MariaDB[isolation.Default]{}, MariaDB[isolation.ReadUncommitted]{}, MariaDB[isolation.ReadCommitted]{}, MariaDB[isolation.RepeatableRead]{}, MariaDB[isolation.Serializable]{},
	SQLite[isolation.Default]{}, SQLite[isolation.Deferred]{}, SQLite[isolation.Immediate]{}, SQLite[isolation.Exclusive]{},
}

func opensHint(name string) string {
	switch name {
	case "sqlite", "sqlite3":
		return "SQLite takes default, deferred, immediate or exclusive"
	case "mysql", "mariadb":
		return "take default, read uncommitted, read committed, repeatable read or serializable"
	}
	return "Postgres takes default, read committed, repeatable read or serializable (it runs read uncommitted as read committed)"
}
