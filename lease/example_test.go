package lease_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// The lease form on SQLite, the one form SQLite runs: a claim writes the lease's expiry into the
// row, the consumer extends it while the handler runs, and a row whose consumer died returns
// when its lease runs out, here after two minutes:
//
//	CREATE TABLE reports (id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0, expires TEXT);
func ExampleNew() {
	reports := inbox.Table{Name: "reports", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", LockedUntil: "expires"}
	form := lease.New(dialect.SQLite[isolation.Immediate]{}, reports, &lease.Config{Lease: 2 * time.Minute})

	// The driver: import _ "github.com/glebarez/go-sqlite".
	db, err := sql.Open("sqlite", "file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	c := inbox.NewConsumer(db, form, inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		// A lease lost (found at an extension) cancels ctx, its cause wrapping inbox.ErrLeaseLost:
		// another consumer may hold the row now.
		if err := render(ctx, dl.Payload); err != nil {
			return outcome.Retry()
		}
		return outcome.Ack()
	}), &inbox.Config{Workers: 2})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func render(ctx context.Context, spec []byte) error { return ctx.Err() } // the application's work
