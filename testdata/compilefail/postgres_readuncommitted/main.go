// Postgres runs READ UNCOMMITTED as READ COMMITTED, so its dialect does not open it.
package main

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

var _ dialect.Dialect = dialect.Postgres[isolation.ReadUncommitted]{}

func main() {}
