package admin

import (
	"context"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Capabilities are what the table's description lets an operator see and do: the states its
// rows are told apart in, the filters that apply, and the actions. A page built on them shows
// what the table has and hides what it lacks.
type Capabilities struct {
	// Queues says rows have a queue (the Queue role): counts and listings are per queue.
	Queues bool `json:"queues"`
	// Kinds says rows have a kind of job (the Kind role): counts are per kind of each queue
	// too, and listings are filtered by kind (Filter.Kinds).
	Kinds bool `json:"kinds"`
	// States are the states a listing and Stats tell apart, in the order an operator reads
	// them: due always; delayed with RetryAfter, in work with the lease column, retrying with
	// Attempt, dead with DeadAt, processed with ProcessedAt, cancelled with CancelledAt.
	States []State `json:"states"`
	// Ages are the states whose rows a filter takes by age (Filter.OlderThan): dead and
	// processed rows by their own stamps, the others with CreatedAt.
	Ages []State `json:"ages"`
	// ErrorFilter says rows can be filtered by their last error (LastError).
	ErrorFilter bool `json:"error_filter"`
	// PayloadFilter says rows can be filtered by a JSON path into their payload (Payload).
	PayloadFilter bool `json:"payload_filter"`
	// Actions are the actions Act runs on this table: requeue with DeadAt, retry now with
	// RetryAfter, cancel with CancelledAt, delete always.
	Actions []Action `json:"actions"`
	// Cancels says rows can be cancelled (Cancel) and cancelled rows requeued
	// (RequeueCancelled): the description has a CancelledAt column.
	Cancels bool `json:"cancels"`
	// Pauses says queues can be paused and resumed (Pause, Resume): the description names a
	// pauses table (inbox.Table.Pauses).
	Pauses bool `json:"pauses"`
	// Groups says rows have a FIFO group (the GroupKey role): Groups lists the groups with
	// rows pending, their head, backlog and holder.
	Groups bool `json:"groups"`
	// Limits says queues can have concurrency limits (SetLimit, ClearLimit, Limits): the
	// description names a limits table (inbox.Table.Limits).
	Limits bool `json:"limits"`
	// Rates says queues can have rate limits (SetRate, ClearRate, Rates): the description
	// names a rates table (inbox.Table.Rates).
	Rates bool `json:"rates"`
	// OldestDue says Stats can date every due row (RetryAfter and CreatedAt), not only those
	// delayed before.
	OldestDue bool `json:"oldest_due"`
}

// Capabilities returns what the description lets an operator see and do.
func (a *Admin) Capabilities() Capabilities {
	t := a.t
	c := Capabilities{
		Queues:        t.Queue != "",
		Kinds:         t.Kind != "",
		ErrorFilter:   t.LastError != "",
		PayloadFilter: t.Payload != "",
		OldestDue:     t.CreatedAt != "",
		Pauses:        t.Pauses != "",
		Cancels:       t.CancelledAt != "",
		Groups:        t.GroupKey != "",
		Limits:        t.Limits != "",
		Rates:         t.Rates != "",
	}
	for _, s := range States {
		if a.stateNeeds("", s) != nil {
			continue
		}
		c.States = append(c.States, s)
		if _, column := a.ageRole(s); column != "" {
			c.Ages = append(c.Ages, s)
		}
	}
	for _, act := range Actions {
		if a.actionNeeds(act) == nil {
			c.Actions = append(c.Actions, act)
		}
	}
	return c
}

// Table returns the description the operator was made with.
func (a *Admin) Table() inbox.Table { return a.t }

// Ping checks that the database answers.
func (a *Admin) Ping(ctx context.Context) error {
	if err := a.db.PingContext(ctx); err != nil {
		return sentinel.Errorf(nil, sentinel.Table(a.t.Name), "the database does not answer: %w", err)
	}
	return nil
}
