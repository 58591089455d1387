// SQLite has no row locks, so the row lock form does not take a SQLite dialect.
package main

import (
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/rowlock"
)

func main() {
	rowlock.New(dialect.SQLite[isolation.Immediate]{}, inbox.Table{Name: "jobs", ID: "id"})
}
