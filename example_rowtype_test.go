package inbox_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/sqlinbox/inbox"
)

// InvoiceJob is one row of invoice_jobs, its columns described by its tags.
type InvoiceJob struct {
	ID          int64           `inbox:"id,generated"`
	Body        json.RawMessage `inbox:"payload,column=body"`
	Attempt     int             `inbox:"attempt"`
	RetryAfter  *time.Time      `inbox:"retry_after"`
	LockedUntil *time.Time      `inbox:"locked_until"`
	Customer    int64           `inbox:"column=customer_id"`
}

// TableOf derives the description a table written by hand would be.
func ExampleTableOf() {
	derived, err := inbox.TableOf[InvoiceJob]("invoice_jobs")
	if err != nil {
		panic(err)
	}
	byHand := inbox.Table{Name: "invoice_jobs", ID: "id", IDGenerated: true, Payload: "body",
		Attempt: "attempt", RetryAfter: "retry_after", LockedUntil: "locked_until", Columns: []string{"customer_id"}}
	fmt.Println(reflect.DeepEqual(derived, byHand))

	type broken struct {
		ID   int64  `inbox:"id"`
		Body []byte `inbox:"paylod"`
	}
	_, err = inbox.TableOf[broken]("invoice_jobs")
	fmt.Println(err)
	// Output:
	// true
	// inbox: schema: row type inbox_test.broken, field Body, tag `inbox:"paylod"`: unknown role "paylod": the roles are id, payload, attempt, processed_at, queue, kind, priority, retry_after, headers, dead_at, last_error, created_at, cancelled_at, locked_until, unique_key, group_key, and an own column is tagged `inbox:"column=NAME"`
}
