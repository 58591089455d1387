package inboxtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// The outcome the application's consumer would settle a row by, for a payload and an attempt:
// its table and Config decide what a retry becomes.
func ExampleConsumer_Handle() {
	type order struct{ ID int }
	h := inbox.JSON(func(ctx context.Context, d *inbox.Delivery, o order) outcome.Outcome {
		switch {
		case o.ID == 0:
			return outcome.Retry().WithError(errors.New("order 0 is not there yet"))
		case d.Attempt < 3:
			return outcome.RetryAfter(time.Duration(d.Attempt) * time.Minute)
		}
		return outcome.Ack()
	})
	orders := inbox.Table{Name: "orders", ID: "id", Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after", DeadAt: "dead_at"}
	c := inboxtest.Consumer{Table: orders, Config: &inbox.Config{Retry: inbox.ExponentialBackoff{Base: time.Minute, Max: time.Minute}, MaxAttempts: 5}}
	ctx := context.Background()
	fmt.Println(c.Handle(ctx, h, inboxtest.JSONDelivery(order{ID: 7}, 1)).Outcome)
	fmt.Println(c.Handle(ctx, h, inboxtest.JSONDelivery(order{ID: 7}, 3)).Outcome)
	fmt.Println(c.Handle(ctx, h, inboxtest.JSONDelivery(order{ID: 0}, 2)).Outcome.Kind())
	dead := c.Handle(ctx, h, inboxtest.JSONDelivery(order{ID: 0}, 5)).Outcome
	fmt.Println(dead, dead.Err())
	r := c.Handle(ctx, h, inboxtest.Delivery([]byte(`{"ID": "seven"}`), 1))
	fmt.Println(r.Outcome, r.DecodeErr != nil)
	// Output:
	// retry after 1m0s
	// ack
	// retry after
	// fail attempt 5 of 5: order 0 is not there yet
	// drop true
}

var (
	db   *sql.DB
	jobs = inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", Queue: "grp"}
	d    = dialect.SQLite[isolation.Immediate]{}
)

// A consumer run in a test until its queue has no row due, and what it settled.
func ExampleDrain() {
	ctx := context.Background()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
	got, err := inboxtest.Drain(ctx, 10*time.Second, func(obs inbox.Observer) *inbox.Consumer {
		return inbox.NewConsumer(db, lease.New(d, jobs, nil), h, &inbox.Config{Queue: "emails", Observer: obs})
	})
	if err != nil {
		panic(err) // t.Fatal(err) in a test
	}
	fmt.Println(got.Settled[outcome.KindAck], "acked")
}

// What the code under test enqueued, read back as messages.
func ExampleEnqueued() {
	ctx := context.Background()
	msgs, err := inboxtest.Enqueued(ctx, db, d, jobs, "emails")
	if err != nil {
		panic(err) // t.Fatal(err) in a test
	}
	for _, m := range msgs {
		fmt.Printf("%d %s\n", m.ID, m.Payload)
	}
}
