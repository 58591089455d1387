// MySQL opens every level listed here and takes the row lock and advisory forms at each.
package main

import (
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/rowlock"
)

var jobs = inbox.Table{Name: "jobs", ID: "id"}

func main() {
	rowlock.New(dialect.MySQL[isolation.Default]{}, jobs)
	advisory.New(dialect.MySQL[isolation.Default]{}, jobs, nil)
	rowlock.New(dialect.MySQL[isolation.ReadUncommitted]{}, jobs)
	advisory.New(dialect.MySQL[isolation.ReadUncommitted]{}, jobs, nil)
	rowlock.New(dialect.MySQL[isolation.ReadCommitted]{}, jobs)
	advisory.New(dialect.MySQL[isolation.ReadCommitted]{}, jobs, nil)
	rowlock.New(dialect.MySQL[isolation.RepeatableRead]{}, jobs)
	advisory.New(dialect.MySQL[isolation.RepeatableRead]{}, jobs, nil)
	rowlock.New(dialect.MySQL[isolation.Serializable]{}, jobs)
	advisory.New(dialect.MySQL[isolation.Serializable]{}, jobs, nil)
}
