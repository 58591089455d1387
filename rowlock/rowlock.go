// Package rowlock is the row lock form, the default: a claim locks its row with SELECT … FOR
// UPDATE SKIP LOCKED in a transaction that stays open while the handler runs, and the
// settlement commits it. Postgres, MySQL and MariaDB; SQLite has no row locks.
package rowlock

import (
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// Dialect is what the row lock form needs from a dialect: SELECT … FOR UPDATE SKIP LOCKED.
// SQLite lacks it, so rowlock.New on a SQLite dialect does not compile (the compiler's message
// names dialect.NoRowLocksOnSQLiteUseLease: take package lease there).
type Dialect interface {
	dialect.Dialect
	RowLocks() dialect.SkipLocked
}

// Form is the row lock form over one table.
type Form[D Dialect] struct {
	d D
	t inbox.Table
}

// New returns the row lock form over table t.
func New[D Dialect](d D, t inbox.Table) *Form[D] { return &Form[D]{d: d, t: t} }
