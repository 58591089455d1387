package examples_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
)

// schema is the queue's table and its claim index, as the command prints them:
//
//	inbox schema -db sqlite -table invoice_jobs -kind-column kind -queue-column= -priority= -headers= -processed-at=
const schema = "CREATE TABLE `invoice_jobs` (\n" +
	"    `id` INTEGER PRIMARY KEY,\n" +
	"    `payload` BLOB,\n" +
	"    `attempt` INTEGER NOT NULL DEFAULT 0,\n" +
	"    `kind` TEXT NOT NULL DEFAULT '',\n" +
	"    `retry_after` TEXT,\n" +
	"    `dead_at` TEXT,\n" +
	"    `last_error` TEXT,\n" +
	"    `locked_until` TEXT\n" +
	");\n" +
	"CREATE INDEX `invoice_jobs_claim` ON `invoice_jobs` (`retry_after`, `id`) WHERE `dead_at` IS NULL;\n"

// SendInvoice is a kind of job: its fields are the job's arguments (stored as JSON), and its
// Kind method names the kind.
type SendInvoice struct {
	Number   int    `json:"number"`
	Customer string `json:"customer"`
}

func (SendInvoice) Kind() string { return "send_invoice" }

// The README's Quick start, as an Example: one typed job on SQLite, published through a
// Client, run by a consumer of its kind, which then stops.
func Example_quickStart() {
	if err := quickStart(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// sent invoice 42 to ada@example.com
	// jobs left: 0
}

// quickStart is the Quick start's run.
func quickStart() error {
	// Ctrl-C ends ctx: the consumer stops claiming and lets its handlers finish.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// A fresh database file for each run; an application opens its own.
	dir, err := os.MkdirTemp("", "invoices")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "invoices.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return err
	}

	// The client, made once: the database, its dialect, and the table's columns by role.
	jobs := inbox.Table{Name: "invoice_jobs", ID: "id", IDGenerated: true, Payload: "payload",
		Attempt: "attempt", Kind: "kind", RetryAfter: "retry_after", DeadAt: "dead_at",
		LastError: "last_error", LockedUntil: "locked_until"}
	client, err := inbox.NewClient(db, dialect.SQLite[isolation.Immediate]{}, jobs)
	if err != nil {
		return err
	}

	// Publish: alone, as here, or inside your own transaction with client.EnqueueTx.
	if err := client.Enqueue(ctx, inbox.Job(SendInvoice{Number: 42, Customer: "ada@example.com"})); err != nil {
		return err
	}

	// Consume: a handler per kind, and the consumer claims the rows of those kinds alone. On
	// SQLite it holds each row by a lease (locked_until) until the handler's outcome is written:
	// nil deletes the row, an error retries it later. This one stops once the invoice is sent.
	sent, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var kinds inbox.Kinds
	inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, inv SendInvoice) error {
		fmt.Println("sent invoice", inv.Number, "to", inv.Customer)
		stopRun()
		return nil
	})
	consumer := client.NewConsumer(lease.For(client, nil), &kinds, nil)
	if err := consumer.Run(sent); err != nil { // until sent (or ctx) ends
		return err
	}

	var left int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM invoice_jobs").Scan(&left); err != nil {
		return err
	}
	fmt.Println("jobs left:", left)
	return nil
}
