package examples_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	_ "github.com/glebarez/go-sqlite" // the database/sql driver, registered as "sqlite"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
)

// SendEmail is a kind of job: its arguments, and the kind's name.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func (SendEmail) Kind() string { return "send_email" }

// Report is another kind, with options of its own.
type Report struct {
	Month string `json:"month"`
}

func (Report) Kind() string { return "report" }

func (Report) KindOptions() inbox.KindOptions {
	return inbox.KindOptions{Priority: 5, MaxAttempts: 3, Timeout: time.Minute}
}

// Two kinds of job on one table, published together and run by one consumer.
func ExampleKinds() {
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()

	db, err := sql.Open("sqlite", "file:jobs?mode=memory&cache=shared")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	jobs := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload",
		Kind: "kind", Priority: "priority", Attempt: "attempt", RetryAfter: "retry_after",
		DeadAt: "dead_at", LastError: "last_error"}
	if _, err := db.ExecContext(ctx, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload BLOB,
		kind TEXT NOT NULL DEFAULT '', priority INTEGER NOT NULL DEFAULT 0,
		attempt INTEGER NOT NULL DEFAULT 0, retry_after TEXT, dead_at TEXT, last_error TEXT,
		locked_until TEXT)`); err != nil {
		log.Fatal(err)
	}
	client, err := inbox.NewClient(db, dialect.SQLite[isolation.Immediate]{}, jobs)
	if err != nil {
		log.Fatal(err)
	}

	// Publish: jobs of any kinds, all or nothing (or inside your transaction: EnqueueTx).
	err = client.Enqueue(ctx,
		inbox.Job(SendEmail{To: "ada@example.com", Subject: "Welcome"}),
		inbox.Job(Report{Month: "2026-11"}),
		inbox.Job(SendEmail{To: "bob@example.com", Subject: "Invoice"}))
	if err != nil {
		log.Fatal(err)
	}

	// Run: a handler per kind; the consumer claims the rows of these kinds alone.
	done := make(chan struct{}, 3)
	var kinds inbox.Kinds
	inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, e SendEmail) error {
		fmt.Println("email to", e.To+":", e.Subject)
		done <- struct{}{}
		return nil
	})
	inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, r Report) error {
		fmt.Println("report of", r.Month)
		done <- struct{}{}
		return nil
	})
	consumer := client.NewConsumer(lease.For(client, nil), &kinds, nil)
	go func() {
		for range 3 {
			<-done
		}
		stop()
	}()
	if err := consumer.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// email to ada@example.com: Welcome
	// email to bob@example.com: Invoice
	// report of 2026-11
}
