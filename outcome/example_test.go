package outcome_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

var errUnavailable = errors.New("the invoicing service is unavailable")

// A handler picks its outcome by what its work returned: Ack when it is done, RetryAfter when it
// failed for a while (the row comes back then), Drop when it can never succeed.
func Example() {
	decide := func(err error) outcome.Outcome {
		switch {
		case err == nil:
			return outcome.Ack()
		case errors.Is(err, errUnavailable):
			return outcome.RetryAfter(30 * time.Second)
		default:
			return outcome.Drop()
		}
	}
	fmt.Println(decide(nil))
	fmt.Println(decide(errUnavailable))
	fmt.Println(decide(errors.New("invoice 42 names no customer")))
	// Output:
	// ack
	// retry after 30s
	// drop
}

// Retry puts the row back at once, counting an attempt; RetryAfter hides it for a while first.
func ExampleRetryAfter() {
	o := outcome.RetryAfter(time.Minute)
	fmt.Println(o.Kind(), o.Delay())
	fmt.Println(outcome.Retry())
	// Output:
	// retry after 1m0s
	// retry
}
