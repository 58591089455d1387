// Immediate is a SQLite mode, not an isolation level.
package main

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

var _ dialect.Dialect = dialect.Postgres[isolation.Immediate]{}

func main() {}
