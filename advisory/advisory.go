// Package advisory is the advisory lock form: a session-level advisory lock on the row's key,
// held on a connection pinned for the delivery. Postgres, MySQL and MariaDB; SQLite has no
// session locks.
package advisory

import (
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// Dialect is what the advisory form needs from a dialect: session locks on a name. SQLite lacks
// them, so advisory.New on a SQLite dialect does not compile.
type Dialect interface {
	dialect.Dialect
	SessionLocks() dialect.AdvisoryLocks
}

// Form is the advisory lock form over one table.
type Form[D Dialect] struct {
	d   D
	t   inbox.Table
	key string
}

// New returns the advisory form over table t, locking each row on the key the template key
// renders (for example "jobs-{id}").
func New[D Dialect](d D, t inbox.Table, key string) (*Form[D], error) {
	return &Form[D]{d: d, t: t, key: key}, nil
}
