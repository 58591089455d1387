package dialect_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/rowlock"
)

// A dialect known when the program is written is a type, its isolation level a type argument:
// a pair the database cannot run does not compile, nor does a form on a database without what
// the form needs (rowlock.New on SQLite).
func Example() {
	jobs := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload"}

	_ = rowlock.New(dialect.Postgres[isolation.ReadCommitted]{}, jobs)
	_ = rowlock.New(dialect.MariaDB[isolation.RepeatableRead]{}, jobs)
	// dialect.Postgres[isolation.ReadUncommitted]{}            does not compile
	// rowlock.New(dialect.SQLite[isolation.Immediate]{}, jobs)  does not compile: use the lease form
}

// A dialect from configuration: Parse checks the level against the database at once, and the
// forms check what they need when the consumer starts.
func ExampleParse() {
	for _, c := range []struct{ name, level string }{
		{"postgres", "read committed"},
		{"sqlite", "immediate"},
		{"postgres", "read uncommitted"},
	} {
		d, err := dialect.Parse(c.name, c.level)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(d.Name())
	}
	// Output:
	// postgres
	// sqlite
	// inbox: dialect: postgres does not open level "read uncommitted": Postgres takes default, read committed, repeatable read or serializable (it runs read uncommitted as read committed)
}

// A dialect from the live connection, when the program learns its database only from a DSN.
func ExampleDetect() {
	ctx := context.Background()
	// The driver: import _ "github.com/go-sql-driver/mysql" (or any other).
	db, err := sql.Open("mysql", "app@tcp(localhost:3306)/app?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	d, err := dialect.Detect(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("the database is %s", d.Name()) // mysql or mariadb
	_ = rowlock.New(d, inbox.Table{Name: "jobs", ID: "id"})
}
