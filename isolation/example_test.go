package isolation_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// A marker is the type argument of a dialect. In transactional mode it sets the level of the
// transaction a handler writes through: here MySQL at repeatable read, so that the handler's
// two reads see the orders as of one moment, and the summary it writes agrees with itself.
func Example() {
	jobs := inbox.Table{Name: "summaries", ID: "id", IDGenerated: true, Payload: "payload"}
	d := dialect.MySQL[isolation.RepeatableRead]{}

	// The driver: import _ "github.com/go-sql-driver/mysql".
	db, err := sql.Open("mysql", "app@tcp(localhost:3306)/app?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	c := inbox.NewConsumer(db, lease.New(d, jobs, nil), inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		var count, total int64
		if err := dl.Tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE day = ?", dl.Payload).Scan(&count); err != nil {
			return outcome.Retry()
		}
		if err := dl.Tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(amount), 0) FROM orders WHERE day = ?", dl.Payload).Scan(&total); err != nil {
			return outcome.Retry()
		}
		if _, err := dl.Tx.ExecContext(ctx, "INSERT INTO daily (day, orders, total) VALUES (?, ?, ?)", dl.Payload, count, total); err != nil {
			return outcome.Retry()
		}
		return outcome.Ack() // commits the summary with the row's settlement
	}), &inbox.Config{Transactional: true})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
