// A dialect chosen at run time compiles with every form; its pair is checked at startup.
package main

import (
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/rowlock"
)

func main() {
	d, err := dialect.Parse("sqlite", "immediate")
	if err != nil {
		panic(err)
	}
	jobs := inbox.Table{Name: "jobs", ID: "id"}
	rowlock.New(d, jobs)
	advisory.New(d, jobs, nil)
}
