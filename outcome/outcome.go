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
//	Fail         set dead_at, attempt + 1,     set dead_at, clear the lease  set dead_at, then
//	             commit                                                      unlock
//	Cancel       set cancelled_at, attempt + 1, set cancelled_at, clear the   set cancelled_at, then
//	             commit                        lease                         unlock
//
// Retry, RetryAfter and Fail also store their error (WithError) in the last_error column where
// the table has one. Ack and Drop change the row alike; they differ in what they say: Ack means
// the work is done, Drop that the message is given up (the consumer logs it, with its reason).
// Fail kills the row: it stays in the table, stamped dead_at, and no claim takes it again;
// where the table has no dead_at column a failed row is dropped instead, and the consumer logs
// it at ERROR. Cancel settles the row as cancelled (stamped cancelled_at, a Drop where the
// table has no such column); a consumer settles so a row cancelled while its handler ran.
//
// A consumer applies its retry policy before a form sees an outcome: a Retry becomes a
// RetryAfter by the policy's delay, and a retry past the attempt limit becomes a Fail (see
// inbox.Config.Retry and inbox.Config.MaxAttempts). Where the table has no retry_after column,
// RetryAfter retries at once and the consumer logs a warning. In transactional mode Ack commits
// the handler's writes with the settlement, and every other outcome rolls them back.
package outcome

import (
	"fmt"
	"time"
	"unicode/utf8"
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
	KindFail
	KindCancel
)

var kindNames = [...]string{"none", "ack", "drop", "retry", "retry after", "fail", "cancel"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Outcome is what to do with a delivered row. Build one with Ack, Drop, Retry, RetryAfter or
// Fail, and attach a reason with WithError. It is a small value: building and returning one
// allocates nothing.
type Outcome struct {
	kind  Kind
	delay time.Duration
	err   error
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

// Cancel settles the row as cancelled: stamped cancelled_at (inbox.Table.CancelledAt), where no
// claim takes it again; on a table without that column it settles as Drop. A consumer settles
// by it every row cancelled while its handler ran (inbox.Cancel), whatever the handler returned
// but an Ack outside transactional mode.
func Cancel() Outcome { return Outcome{kind: KindCancel} }

// Fail kills the row at once, for err: it is stamped dead_at and never claimed again, and err's
// text is kept in last_error, where the table has those columns (without dead_at the row is
// dropped, and the consumer logs it with err).
func Fail(err error) Outcome { return Outcome{kind: KindFail, err: err} }

// WithError returns o carrying err as its reason: the text a Retry, RetryAfter or Fail stores in
// last_error, and that the consumer logs with a Drop.
func (o Outcome) WithError(err error) Outcome {
	o.err = err
	return o
}

// Err is o's reason, given by Fail or WithError; nil when it has none.
func (o Outcome) Err() error { return o.err }

// Kind reports what o does.
func (o Outcome) Kind() Kind { return o.kind }

// Delay is how long a RetryAfter outcome hides its row; zero for the others.
func (o Outcome) Delay() time.Duration { return o.delay }

// Settles reports whether o ends the row's life in the queue (Ack, Drop or Cancel).
func (o Outcome) Settles() bool {
	return o.kind == KindAck || o.kind == KindDrop || o.kind == KindCancel
}

func (o Outcome) String() string {
	if o.kind == KindRetryAfter {
		return "retry after " + o.delay.String()
	}
	return o.kind.String()
}

// LastErrorMax bounds, in bytes, the text an outcome's error leaves in last_error.
const LastErrorMax = 2000

// LastError is the text o's error leaves in the last_error column: the error's text, cut to at
// most LastErrorMax bytes on a UTF-8 boundary; nil (NULL) when o has no error.
func (o Outcome) LastError() any {
	if o.err == nil {
		return nil
	}
	return Truncate(o.err.Error(), LastErrorMax)
}

// Truncate cuts s to at most n bytes, never inside a UTF-8 sequence.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
