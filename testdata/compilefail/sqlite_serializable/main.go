// SQLite declares transaction modes, not isolation levels.
package main

import (
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

var _ dialect.Dialect = dialect.SQLite[isolation.Serializable]{}

func main() {}
