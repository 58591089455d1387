package integration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// invoiceSchema creates the table before the consumer checks it.
const invoiceSchema = `CREATE TABLE invoice_jobs (id BIGSERIAL PRIMARY KEY, payload BYTEA)`

// Invoice is the payload of one invoice_jobs row.
type Invoice struct {
	Number   int    `json:"number"`
	Customer string `json:"customer"`
}

// Four workers issue invoices on Postgres; each holds its row's lock and a connection until its
// acknowledgement commits. The table names no lease column and no advisory key: the row lock
// form. A crash rolls a claim's transaction back, and its row returns at once.
func Example_invoices() {
	ctx := context.Background()
	db, err := sql.Open("pgx", startServers(nil).postgres)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	// Each of the four workers holds a connection while its invoice is in work; the fifth stays
	// free for the application.
	db.SetMaxOpenConns(5)

	// The table, created before the consumer checks it.
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS invoice_jobs"); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.ExecContext(ctx, invoiceSchema); err != nil {
		fmt.Println(err)
		return
	}
	defer db.ExecContext(ctx, "DROP TABLE invoice_jobs")

	jobs := inbox.Table{Name: "invoice_jobs", ID: "id", IDGenerated: true, Payload: "payload"}
	pg := dialect.Postgres[isolation.ReadCommitted]{}

	var invoices []Invoice
	for n := 1001; n <= 1008; n++ {
		invoices = append(invoices, Invoice{Number: n, Customer: fmt.Sprintf("customer-%d", n%3)})
	}
	if err := inbox.EnqueueJSON(ctx, db, pg, jobs, "invoices", invoices...); err != nil {
		fmt.Println(err)
		return
	}

	// The claim's transaction holds the row while the handler runs; the acknowledgement deletes
	// the row and commits.
	run, stop := context.WithCancel(ctx)
	var (
		mu     sync.Mutex
		issued []int
	)
	issue := inbox.JSON(func(ctx context.Context, d *inbox.Delivery, invoice Invoice) outcome.Outcome {
		mu.Lock()
		defer mu.Unlock()
		issued = append(issued, invoice.Number)
		if len(issued) == len(invoices) {
			stop() // the example ends once every invoice is issued; a service runs on
		}
		return outcome.Ack()
	})
	consumer := inbox.NewConsumer(db, rowlock.New(pg, jobs), issue, &inbox.Config{Queue: "invoices", Workers: 4, Retry: inbox.RetryAtOnce})
	if err := consumer.Run(run); err != nil {
		fmt.Println(err)
		return
	}

	slices.Sort(issued)
	for _, n := range issued {
		fmt.Println("issued invoice", n)
	}
	var left int
	db.QueryRowContext(ctx, "SELECT COUNT(*) FROM invoice_jobs").Scan(&left)
	fmt.Println("rows left:", left)
	// Output:
	// issued invoice 1001
	// issued invoice 1002
	// issued invoice 1003
	// issued invoice 1004
	// issued invoice 1005
	// issued invoice 1006
	// issued invoice 1007
	// issued invoice 1008
	// rows left: 0
}
