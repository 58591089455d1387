// SQLite opens the default and its three modes.
package main

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

var (
	_ dialect.Dialect = dialect.SQLite[isolation.Default]{}
	_ dialect.Dialect = dialect.SQLite[isolation.Deferred]{}
	_ dialect.Dialect = dialect.SQLite[isolation.Immediate]{}
	_ dialect.Dialect = dialect.SQLite[isolation.Exclusive]{}
)

func main() {}
