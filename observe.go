package inbox

import (
	"context"
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/outcome"
)

// Observer is told of a consumer's claims, of each unit (a delivery, or a batch) handed to the
// handler, and of the unit's settlement: the seam for metrics and traces (the module
// github.com/sqlinbox/inbox/otel is one). Set it as Config.Observer; unset, the consumer does
// no work for it.
//
// The consumer's workers call it side by side, so its methods must be safe for concurrent use,
// and since they run in a worker's path they should return at once. The consumer allocates
// nothing to call them. The deliveries an event names are valid until Settled returns for
// their unit: an observer must not keep them, nor the slices that hold them.
//
// For handler middleware no observer is needed: wrap the Handler (see Handler).
type Observer interface {
	// Claimed reports a claim: how many rows it took (none is not an error), how long it took,
	// and its error.
	Claimed(ctx context.Context, c Claim)
	// Handling reports a unit about to be handed to the handler and returns the context the
	// handler runs with: ctx itself, or a context derived from ctx (one carrying a span, say),
	// so that the consumer's cancellation still reaches the handler. A unit whose every row is
	// undecodable, and so never reaches the handler, is reported all the same.
	Handling(ctx context.Context, u Unit) context.Context
	// Settled reports the settlement of a unit once its handler returned, with the context
	// Handling returned for it: each Handling is followed by one Settled, unless its handler
	// never returns.
	Settled(ctx context.Context, s Settlement)
}

// Claim is a claim, as Observer.Claimed reports it.
type Claim struct {
	Queue string // Config.Queue
	Form  string // the form's name (Plan.Form)
	Table string // the table's name (Plan.Table)
	// Rows is how many rows the claim took.
	Rows int
	// Duration is how long the claim took. A claim made in one call with a settlement (a form
	// that offers Plan.SettleAndClaim) reports the duration of both.
	Duration time.Duration
	// Err is the claim's error; the consumer claims again after a pause.
	Err error
	// Concurrent is how many other claims of the consumer were in flight as this one returned.
	// A claim that found no row while another was taking rows says little of the queue: the
	// rows it skipped were being claimed.
	Concurrent int
}

// Unit is a unit of work handed to the handler, as Observer.Handling reports it.
type Unit struct {
	Queue string // Config.Queue
	Form  string // the form's name (Plan.Form)
	Table string // the table's name (Plan.Table)
	// Deliveries are the unit's rows: one, or a batch's. Delivery.DecodeError says which do not
	// decode.
	Deliveries []*Delivery
	// Claimed is when the claim that took the rows returned: a row another worker claimed
	// waited from then until now.
	Claimed time.Time
}

// Settlement is a unit's settlement, as Observer.Settled reports it.
type Settlement struct {
	Queue string // Config.Queue
	Form  string // the form's name (Plan.Form)
	Table string // the table's name (Plan.Table)
	// Deliveries are the unit's rows, as Unit.Deliveries.
	Deliveries []*Delivery
	// Outcomes[i] is the outcome Deliveries[i] was settled by: after the consumer turned a
	// panic or a zero outcome into Retry and an undecodable row into Config.UndecodablePayload,
	// and in transactional mode after a batch whose outcomes were not all Ack had its Acks
	// turned into Retry (their writes did not land).
	Outcomes []outcome.Outcome
	// HandlerDuration is how long the handler ran (zero where no row reached it).
	HandlerDuration time.Duration
	// SettleDuration is how long the settlement took. A settlement made in one call with the
	// worker's next claim (a form that offers Plan.SettleAndClaim) reports the duration of both.
	SettleDuration time.Duration
	// Err is nil when every outcome was applied. Otherwise no outcome was, save in a lease
	// batch whose error is a *LeaseLostError: it names the rows left unchanged, and the others
	// settled. A unit whose handler outlived the shutdown timeout was given back unsettled,
	// with an Err wrapping ErrClosed.
	Err error
}

// errAbandoned is the Settlement.Err of a unit that shutdown gave back while its handler ran.
var errAbandoned = sentinel.Errorf(ErrClosed, "", "the handler outlived the shutdown timeout, and its rows were given back unsettled")

// DecodeError is the error Undecodable recorded for the delivery, nil when its data decodes.
// A middleware or an observer reads it to tell why a row was settled by
// Config.UndecodablePayload.
func (d *Delivery) DecodeError() error { return d.decodeErr }

// now is the time for the observer, the zero time where there is none.
func (r *run) now() time.Time {
	if r.c.cfg.Observer == nil {
		return time.Time{}
	}
	return time.Now()
}

// observeClaim reports a claim of ds that began at began, and stamps the rows with the time it
// returned. The caller holds the claim's slot.
func (r *run) observeClaim(ctx context.Context, ds []*Delivery, began time.Time, err error) {
	obs := r.c.cfg.Observer
	if obs == nil {
		return
	}
	now := time.Now()
	for _, d := range ds {
		d.claimed = now
	}
	obs.Claimed(ctx, Claim{Queue: r.c.cfg.Queue, Form: r.plan.Form, Table: r.plan.Table, Rows: len(ds), Duration: now.Sub(began), Err: err,
		Concurrent: len(r.claimSlots) - 1}) // this claim holds a slot until it is reported
}

// observeHandling reports unit u before its handler runs and returns the handler's context and
// the time the handler starts.
func (r *run) observeHandling(ctx context.Context, u []*Delivery) (context.Context, time.Time) {
	obs := r.c.cfg.Observer
	if obs == nil {
		return ctx, time.Time{}
	}
	ctx = obs.Handling(ctx, Unit{Queue: r.c.cfg.Queue, Form: r.plan.Form, Table: r.plan.Table, Deliveries: u, Claimed: u[0].claimed})
	return ctx, time.Now()
}

// observeSettled reports the settlement of unit u by outs, which took from settling to now,
// its handler having run for handler.
func (r *run) observeSettled(ctx context.Context, u []*Delivery, outs []outcome.Outcome, handler time.Duration, settling time.Time, err error) {
	obs := r.c.cfg.Observer
	if obs == nil {
		return
	}
	if !decodable(u) {
		handler = 0
	}
	obs.Settled(ctx, Settlement{Queue: r.c.cfg.Queue, Form: r.plan.Form, Table: r.plan.Table, Deliveries: u, Outcomes: outs,
		HandlerDuration: handler, SettleDuration: time.Since(settling), Err: err})
}

// appliedInTx returns the outcomes a transactional batch's settlement applies (BatchForm): the
// outcomes given when every one is Ack, otherwise each Ack as a Retry.
func (r *run) appliedInTx(s *slot, outs []outcome.Outcome) []outcome.Outcome {
	allAck := true
	for _, o := range outs {
		allAck = allAck && o.Kind() == outcome.KindAck
	}
	if allAck {
		return outs
	}
	s.applied = append(s.applied[:0], outs...)
	for i, o := range s.applied {
		if o.Kind() == outcome.KindAck {
			s.applied[i] = outcome.Retry()
		}
	}
	return s.applied
}

// decodable reports whether any row of u reached the handler.
func decodable(u []*Delivery) bool {
	for _, d := range u {
		if d.decodeErr == nil {
			return true
		}
	}
	return false
}
