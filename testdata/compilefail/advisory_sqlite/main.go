// SQLite has no session locks, so the advisory form does not take a SQLite dialect.
package main

import (
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

func main() {
	advisory.New(dialect.SQLite[isolation.Default]{}, inbox.Table{Name: "jobs", ID: "id"}, nil)
}
