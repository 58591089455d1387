// Package outcome holds what a handler returns: what to do with the row it was handed.
//
// What each outcome does depends on the form that holds the row:
//
//	             row lock (rowlock)            lease (lease)                 advisory (advisory)
//	Ack          delete the row, or stamp      delete, or stamp              delete, or stamp
//	             processed_at; commit          processed_at, while the       processed_at; then
//	                                           lease still holds             unlock
//	Drop         as Ack                        as Ack                        as Ack
//	Retry        attempt + 1 and commit (no    clear the lease (the claim    unlock (the take counted
//	             attempt column: roll back)    counted the attempt)          the attempt)
//	RetryAfter   set retry_after, attempt + 1, set retry_after, clear the    set retry_after, then
//	             commit                        lease                         unlock
//
// Ack and Drop change the row alike; they differ in what they say: Ack means the work is done,
// Drop that the message is given up (the consumer logs it). Where the table has no retry_after
// column, RetryAfter retries at once and the consumer logs a warning. In transactional mode Ack
// commits the handler's writes with the settlement, and every other outcome rolls them back.
package outcome

import (
	"fmt"
	"time"
)

// Kind is what an Outcome does.
type Kind uint8

// The kinds of outcome. The zero Kind is no outcome at all: a handler that returns the zero
// Outcome has its row retried, and the consumer logs it.
const (
	KindNone Kind = iota
	KindAck
	KindDrop
	KindRetry
	KindRetryAfter
)

var kindNames = [...]string{"none", "ack", "drop", "retry", "retry after"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Outcome is what to do with a delivered row. Build one with Ack, Drop, Retry or RetryAfter.
type Outcome struct {
	kind  Kind
	delay time.Duration
}

// Ack settles the row as handled: it is deleted, or stamped processed_at where the table has
// that column.
func Ack() Outcome { return Outcome{kind: KindAck} }

// Drop settles the row as given up: it changes like Ack, and the consumer logs it.
func Drop() Outcome { return Outcome{kind: KindDrop} }

// Retry hands the row back to be claimed again, as soon as any consumer asks.
func Retry() Outcome { return Outcome{kind: KindRetry} }

// RetryAfter hands the row back and hides it from claims for d (negative d counts as zero).
func RetryAfter(d time.Duration) Outcome {
	return Outcome{kind: KindRetryAfter, delay: max(d, 0)}
}

// Kind reports what o does.
func (o Outcome) Kind() Kind { return o.kind }

// Delay is how long a RetryAfter outcome hides its row; zero for the others.
func (o Outcome) Delay() time.Duration { return o.delay }

// Settles reports whether o ends the row's life in the queue (Ack or Drop).
func (o Outcome) Settles() bool { return o.kind == KindAck || o.kind == KindDrop }

func (o Outcome) String() string {
	if o.kind == KindRetryAfter {
		return "retry after " + o.delay.String()
	}
	return o.kind.String()
}
