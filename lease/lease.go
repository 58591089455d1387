// Package lease is the lease form: a claim writes an expiry into the row (locked_until) and
// commits at once; the expiry is the ownership token every extension and settlement is guarded
// by. All four databases.
package lease

import (
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// Config tunes the lease form. The zero value (or nil) takes the defaults.
type Config struct {
	// Column names the lease's expiry column. Default "locked_until".
	Column string
	// Lease is how long a claim holds its row before another consumer may take it; the consumer
	// extends it every half lease while the handler runs. Whole seconds, at least one. Default
	// 30 s.
	Lease time.Duration
}

// Form is the lease form over one table.
type Form[D dialect.Dialect] struct {
	d   D
	t   inbox.Table
	cfg Config
}

// New returns the lease form over table t.
func New[D dialect.Dialect](d D, t inbox.Table, cfg *Config) *Form[D] {
	f := &Form[D]{d: d, t: t}
	if cfg != nil {
		f.cfg = *cfg
	}
	return f
}
