package inbox_test

import (
	"context"
	"database/sql"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

type Invoice struct {
	Number   int    `json:"number"`
	Customer string `json:"customer"`
}

func issue(ctx context.Context, inv Invoice) error { return nil } // the application's work

// invoiceJobs describes the table of the invoices' queue.
var invoiceJobs = inbox.Table{Name: "invoice_jobs", ID: "id", IDGenerated: true,
	Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after"}

// openDB opens the application's database, or ends the program; each example says which
// driver it imports.
func openDB(driver, dsn string) *sql.DB {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// A service that publishes invoices and issues them, on Postgres, until it is interrupted. The
// table must exist first:
//
//	CREATE TABLE invoice_jobs (id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0, retry_after TIMESTAMPTZ);
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// The driver: import _ "github.com/jackc/pgx/v5/stdlib".
	db := openDB("pgx", "postgres://localhost/app")
	defer db.Close()
	db.SetMaxOpenConns(5) // four workers, each holding a connection, and one for the application
	d := dialect.Postgres[isolation.ReadCommitted]{}

	if err := inbox.EnqueueJSON(ctx, db, d, invoiceJobs, "", Invoice{Number: 42, Customer: "ACME"}); err != nil {
		log.Fatal(err)
	}

	c := inbox.NewConsumer(db, rowlock.New(d, invoiceJobs),
		inbox.JSON(func(ctx context.Context, dl *inbox.Delivery, inv Invoice) outcome.Outcome {
			if err := issue(ctx, inv); err != nil {
				return outcome.RetryAfter(time.Minute)
			}
			return outcome.Ack()
		}),
		&inbox.Config{Workers: 4})
	if err := c.Run(ctx); err != nil { // until ctx ends, then the handlers in work finish
		log.Fatal(err)
	}
}

// Publishing in the application's own transaction: the order and its invoice job commit
// together, or neither does.
func ExampleEnqueueTx() {
	ctx := context.Background()
	// The driver: import _ "github.com/jackc/pgx/v5/stdlib".
	db := openDB("pgx", "postgres://localhost/app")
	defer db.Close()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (number, customer) VALUES ($1, $2)", 42, "ACME"); err != nil {
		log.Fatal(err)
	}
	msg, err := inbox.JSONMessage("", Invoice{Number: 42, Customer: "ACME"})
	if err != nil {
		log.Fatal(err)
	}
	if err := inbox.EnqueueTx(ctx, tx, dialect.Postgres[isolation.ReadCommitted]{}, invoiceJobs, msg); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}

// A message with every field: to the queue "invoices" of a table with a queue column, ahead of
// the rows of priority 0, with headers, due in five minutes.
func ExampleEnqueue() {
	// The driver: import _ "github.com/go-sql-driver/mysql".
	db := openDB("mysql", "app@tcp(localhost:3306)/app?parseTime=true")
	defer db.Close()
	jobs := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload",
		Queue: "queue", Priority: "priority", Headers: "headers", RetryAfter: "retry_after"}

	err := inbox.Enqueue(context.Background(), db, dialect.MySQL[isolation.ReadCommitted]{}, jobs, inbox.Message{
		Queue:    "invoices",
		Payload:  []byte(`{"number":42}`),
		Priority: -1,
		Headers:  map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Delay:    5 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
}

// In transactional mode a handler writes through Delivery.Tx: its writes commit with the row's
// Ack, and any other outcome rolls them back, so the ledger is written once per invoice however
// often its row is delivered.
func ExampleConfig_transactional() {
	// The driver: import _ "github.com/jackc/pgx/v5/stdlib".
	db := openDB("pgx", "postgres://localhost/app")
	defer db.Close()

	c := inbox.NewConsumer(db, lease.New(dialect.Postgres[isolation.ReadCommitted]{}, invoiceJobs, nil),
		inbox.JSON(func(ctx context.Context, dl *inbox.Delivery, inv Invoice) outcome.Outcome {
			if _, err := dl.Tx.ExecContext(ctx, "INSERT INTO ledger (invoice, customer) VALUES ($1, $2)", inv.Number, inv.Customer); err != nil {
				return outcome.RetryAfter(time.Minute)
			}
			return outcome.Ack()
		}),
		&inbox.Config{Transactional: true, Workers: 4})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// A batch consumer hands its handler up to 100 rows at once, here of the queue "invoices", and
// settles them together; a handler returns an outcome per row.
func ExampleNewBatchConsumer() {
	// The driver: import _ "github.com/go-sql-driver/mysql".
	db := openDB("mysql", "app@tcp(localhost:3306)/app?parseTime=true")
	defer db.Close()
	jobs := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Queue: "queue"}

	c := inbox.NewBatchConsumer(db, lease.New(dialect.MariaDB[isolation.ReadCommitted]{}, jobs, nil), 100,
		inbox.JSONBatch(func(ctx context.Context, ds []*inbox.Delivery, invs []Invoice) []outcome.Outcome {
			outs := make([]outcome.Outcome, len(ds))
			for i, inv := range invs { // invs[i] is ds[i]'s payload
				outs[i] = outcome.Ack()
				if err := issue(ctx, inv); err != nil {
					outs[i] = outcome.RetryAfter(time.Minute)
				}
			}
			return outs
		}),
		&inbox.Config{Queue: "invoices", Workers: 2})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// A handler of raw payloads, without a JSON type: it reads the row's id, attempt and headers.
func ExampleHandlerFunc() {
	// The driver: import _ "github.com/glebarez/go-sqlite".
	db := openDB("sqlite", "file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	defer db.Close()
	jobs := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", Headers: "headers"}

	h := inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		if dl.Attempt > 5 {
			log.Printf("job %d: giving up after %d attempts (trace %s)", dl.ID, dl.Attempt-1, dl.Headers["traceparent"])
			return outcome.Drop()
		}
		log.Printf("job %d: %d bytes", dl.ID, len(dl.Payload))
		return outcome.Ack()
	})
	c := inbox.NewConsumer(db, lease.New(dialect.SQLite[isolation.Immediate]{}, jobs, nil), h, nil)
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
