package advisory_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
)

// The advisory form on Postgres, keyed by account: the rows of one account run one at a time and
// in claim order, while other accounts run in parallel. The account column has no role; the key
// template names it:
//
//	CREATE TABLE transfers (id BIGSERIAL PRIMARY KEY, account TEXT NOT NULL, payload BYTEA);
func ExampleNew() {
	transfers := inbox.Table{Name: "transfers", ID: "id", IDGenerated: true, Payload: "payload"}
	form := advisory.New(dialect.Postgres[isolation.ReadCommitted]{}, transfers, &advisory.Config{Key: "transfers-{account}"})

	// The driver: import _ "github.com/jackc/pgx/v5/stdlib".
	db, err := sql.Open("pgx", "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(9) // each delivery in work pins a connection: eight workers and one spare

	c := inbox.NewConsumer(db, form, inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		log.Printf("transfer %d: %s", dl.ID, dl.Payload)
		return outcome.Ack()
	}), &inbox.Config{Workers: 8})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
