// Package settleplan turns the outcomes of a unit of deliveries (one row, or a batch) into the
// settlement statements that apply them: which kind of statement, over which rows, stamping
// what. It does no I/O and knows no form: each form runs the steps under its own hold (the row
// lock's transaction, the lease's token, the advisory lock's connection), with the statements
// internal/sqltext builds for each kind.
//
// Every form settles the same way: an Ack and a Drop take the row out of the queue (a Fail too
// where the table cannot keep a dead row, a Cancel where it cannot keep a cancelled one), a Fail
// stamps dead_at, a Cancel cancelled_at, a RetryAfter stamps
// retry_after (a retry at once where the table has no column for it), and a Retry gives the
// row back, by a statement only where the form's retry writes something. Rows of one kind share
// one step; stamps share one only when they stamp the same delay and the same last error.
package settleplan

import (
	"time"

	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
)

// Table is what a unit's table and form can record of an outcome.
type Table struct {
	ProcessedAt bool // an Ack stamps processed_at; without it an Ack deletes the row
	DeadAt      bool // a Fail stamps dead_at; without it a dying row is dropped
	RetryAfter  bool // a RetryAfter stamps retry_after; without it the row is retried at once
	LastError   bool // a Fail and a RetryAfter also stamp last_error
	CancelledAt bool // a Cancel stamps cancelled_at; without it a Cancel settles as a Drop
	// RetryWrites says a retry is a statement (the lease form clears its lease; the row lock
	// form counts the attempt where the claim did not). Without it, a retry is the end of the
	// hold alone, and the plan has no step for it.
	RetryWrites bool
}

// Step is one settlement statement: the kind it settles as, what it stamps, and the rows it
// settles, as indexes into the outcomes planned, in their order.
type Step struct {
	// Kind is outcome.KindAck (Acks, Drops, and Fails on a table without dead_at, Cancels on
	// one without cancelled_at), outcome.KindRetry, outcome.KindRetryAfter, outcome.KindFail or
	// outcome.KindCancel.
	Kind      outcome.Kind
	Delay     time.Duration // a RetryAfter's: the rows fall due this long after now
	LastError any           // the last error stamped (outcome.Outcome.LastError), or nil
	Rows      []int
}

// Plan is the settlement of a unit: its steps in the order they run (the ack, the retry, then
// each stamp in the order its first row appears), and the rows whose RetryAfter is a retry at
// once for want of a retry_after column, which a form warns of.
type Plan struct {
	Steps       []Step
	Unscheduled []int
}

// Of plans the settlement of os on table t. With writesRolledBack (a transactional unit whose
// handler's writes did not land) an Ack settles as a Retry: the row's work was not done.
func Of(t Table, os []outcome.Outcome, writesRolledBack bool) Plan {
	var p Plan
	var ack, retry *Step
	var stamps []Step
	for i, o := range os {
		s := t.step(o, writesRolledBack)
		if o.Kind() == outcome.KindRetryAfter && s.Kind == outcome.KindRetry {
			p.Unscheduled = append(p.Unscheduled, i)
		}
		switch {
		case s.Kind == outcome.KindRetry && !t.RetryWrites:
			continue
		case s.Kind == outcome.KindAck:
			ack = joined(ack, s, i)
		case s.Kind == outcome.KindRetry:
			retry = joined(retry, s, i)
		default:
			stamps = stamped(stamps, s, i)
		}
	}
	for _, s := range []*Step{ack, retry} {
		if s != nil {
			p.Steps = append(p.Steps, *s)
		}
	}
	p.Steps = append(p.Steps, stamps...)
	return p
}

// joined adds row i to step at, made from s when it is the first row of its kind.
func joined(at *Step, s Step, i int) *Step {
	if at == nil {
		at = &s
	}
	at.Rows = append(at.Rows, i)
	return at
}

// stamped adds row i, stamped as s, to the stamp of stamps that stamps the same, or as a new
// stamp after the others.
func stamped(stamps []Step, s Step, i int) []Step {
	for j, q := range stamps {
		if q.Kind == s.Kind && q.Delay == s.Delay && q.LastError == s.LastError {
			stamps[j].Rows = append(stamps[j].Rows, i)
			return stamps
		}
	}
	s.Rows = []int{i}
	return append(stamps, s)
}

// One is the step that settles a single row by o, and whether it has one (a retry that writes
// nothing has none). It allocates nothing: Rows is left nil.
func One(t Table, o outcome.Outcome, writesRolledBack bool) (Step, bool) {
	s := t.step(o, writesRolledBack)
	return s, s.Kind != outcome.KindRetry || t.RetryWrites
}

// Values are the values step s binds besides the rows it names (sqltext.Values), with now the
// settlement's time and at the database's form of a time (dialect.Dialect.Time): At, an Ack's
// processed_at stamp (where t has the column), a Cancel's cancelled_at stamp, or a stamp's time (now, or now plus a
// RetryAfter's delay), and Error, the stamp's last error (where t has the column); nothing for
// a Retry. A statement binds them in the order of its parameters
// (sqltext.Statement.Bind); the caller adds the rows' ids and tokens.
func (t Table) Values(s Step, now time.Time, at func(time.Time) any) sqltext.Values {
	switch s.Kind {
	case outcome.KindAck:
		if t.ProcessedAt {
			return sqltext.Values{At: at(now)}
		}
		return sqltext.Values{}
	case outcome.KindRetry:
		return sqltext.Values{}
	case outcome.KindCancel:
		return sqltext.Values{At: at(now)}
	}
	v := sqltext.Values{At: at(now.Add(s.Delay))}
	if t.LastError {
		v.Error = s.LastError
	}
	return v
}

// step is the statement o settles as on t, without its rows.
func (t Table) step(o outcome.Outcome, writesRolledBack bool) Step {
	switch k := o.Kind(); {
	case k == outcome.KindFail && t.DeadAt:
		return Step{Kind: k, LastError: t.lastError(o)}
	case k == outcome.KindAck && writesRolledBack:
		return Step{Kind: outcome.KindRetry}
	case k == outcome.KindCancel && t.CancelledAt:
		return Step{Kind: k}
	case k == outcome.KindAck, k == outcome.KindDrop, k == outcome.KindFail, k == outcome.KindCancel:
		return Step{Kind: outcome.KindAck}
	case k == outcome.KindRetryAfter && t.RetryAfter:
		return Step{Kind: k, Delay: o.Delay(), LastError: t.lastError(o)}
	}
	return Step{Kind: outcome.KindRetry}
}

func (t Table) lastError(o outcome.Outcome) any {
	if !t.LastError {
		return nil
	}
	return o.LastError()
}
