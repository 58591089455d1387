// Package sentinel holds the library's sentinel errors, so that the dialect package can wrap
// them without importing the root package. The root package re-exports each one.
package sentinel

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

var (
	LeaseLost        = errors.New("inbox: lease lost")
	Closed           = errors.New("inbox: closed")
	Dialect          = errors.New("inbox: dialect")
	Schema           = errors.New("inbox: schema")
	ServerTooOld     = errors.New("inbox: server too old")
	AlreadyConsuming = errors.New("inbox: already consuming")
	TransactionHeld  = errors.New("inbox: transaction held")
	TransactionEnded = errors.New("inbox: transaction ended")
	CommitUnknown    = errors.New("inbox: commit outcome unknown")
	DeathFailed      = errors.New("inbox: death failed")
	NotFound         = errors.New("inbox: not found")
	InWork           = errors.New("inbox: in work")
	Settled          = errors.New("inbox: settled")
	UniqueKeyTooLong = errors.New("inbox: unique key too long")
	Paused           = errors.New("inbox: queue paused")
	Cancelled        = errors.New("inbox: cancelled")
	GroupKeyTooLong  = errors.New("inbox: group key too long")
	LimitKeyTooLong  = errors.New("inbox: limit key too long")
)

// BacksOff reports whether a settlement that failed with err is one a form backs off by the
// consumer's policy (inbox.Binding.Backoff): a failure of its own (a statement the database
// refused), not a lost hold, a closed form, a transaction the handler held or the database
// ended, or a COMMIT whose outcome is unknown, each of which has its own rule.
func BacksOff(err error) bool {
	for _, e := range []error{LeaseLost, Closed, TransactionHeld, TransactionEnded, CommitUnknown} {
		if errors.Is(err, e) {
			return false
		}
	}
	return err != nil
}

// Errorf returns an error of the library that reads "inbox: <kind>: <where>: <what>": kind is
// one of the sentinels above, or nil for an error of no kind (which reads "inbox: <where>:
// <what>"); where names the queue, table, column or row (Table, Queue, Row, Rows, Column), or
// is empty; what is format and args as fmt.Errorf formats them, and says what to change. The
// error matches kind, and each error a %w in format wraps, with errors.Is and errors.As.
//
// A wrapped error of the library loses its own "inbox: " in the text, so that an error reads
// with one prefix however deep the wrapping.
func Errorf(kind error, where, format string, args ...any) error {
	cloned := false
	for i, a := range args {
		if e, ok := a.(error); ok && strings.HasPrefix(e.Error(), prefix) {
			if !cloned { // args may be the caller's own slice: change a copy
				args, cloned = slices.Clone(args), true
			}
			args[i] = unprefixed{e}
		}
	}
	e := &libError{kind: kind, where: where, cause: fmt.Errorf(format, args...)}
	var b strings.Builder
	if kind != nil {
		b.WriteString(kind.Error())
	} else {
		b.WriteString("inbox")
	}
	if where != "" {
		b.WriteString(": ")
		b.WriteString(where)
	}
	if format != "" {
		b.WriteString(": ")
		b.WriteString(e.cause.Error())
	}
	e.text = b.String()
	return e
}

const prefix = "inbox: "

// Table names a table, as an error's where.
func Table(table string) string { return "table " + strconv.Quote(table) }

// Queue names a queue of a table, as an error's where.
func Queue(table, queue string) string { return Table(table) + ", queue " + strconv.Quote(queue) }

// Column names a column of a table, as an error's where.
func Column(table, column string) string {
	return Table(table) + ", column " + strconv.Quote(column)
}

// Row names a row of a table by its id, as an error's where.
func Row(table string, id int64) string { return Table(table) + ", row " + strconv.FormatInt(id, 10) }

// Rows names rows of a table by their ids, as an error's where.
func Rows(table string, ids []int64) string { return Table(table) + fmt.Sprintf(", rows %v", ids) }

// libError is an error Errorf made: its text, its kind, and the error its what formats.
type libError struct {
	text  string
	kind  error
	where string
	cause error
}

func (e *libError) Error() string { return e.text }

// Unwrap returns the kind (when there is one) and the error of the what, which wraps what its
// format's %w verbs name.
func (e *libError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.cause}
	}
	return []error{e.kind, e.cause}
}

// unprefixed is a wrapped error of the library whose text drops the "inbox: " its wrapper
// already has.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), prefix) }
func (u unprefixed) Unwrap() error { return u.err }

// At returns err said of where: an error Errorf made with no where of its own takes where (and
// keeps its kind and what); any other error is wrapped as Errorf(nil, where, "%w", err).
func At(where string, err error) error {
	if e, ok := err.(*libError); ok && e.where == "" {
		return Errorf(e.kind, where, "%w", e.cause)
	}
	return Errorf(nil, where, "%w", err)
}
