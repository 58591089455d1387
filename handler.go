package inbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sqlinbox/inbox/outcome"
)

// Handler handles one delivery and says what to do with its row. It may run as long as it
// needs (the lease form extends its hold meanwhile) and should return soon after ctx is done:
// at shutdown the consumer cancels ctx when the shutdown timeout runs out, then abandons the
// handler. The consumer also cancels ctx when an extension finds the hold lost (the lease ran
// out and another consumer may hold the row now), with a cause wrapping ErrLeaseLost
// (context.Cause(ctx) says so): the row's settlement can no longer change it, and the work is
// another consumer's.
//
// Middleware is a func(Handler) Handler whose handler calls the one it wraps (BatchHandler
// likewise); no option is needed. It sees what the wrapped handler returned, before the
// consumer turns a zero outcome into Retry (a panic passes through it unless it recovers), and
// after the inner handler returns Delivery.DecodeError says whether an adapter (JSON) found the
// payload undecodable. What the consumer then applies is Config.Observer's to see.
type Handler interface {
	Handle(ctx context.Context, d *Delivery) outcome.Outcome
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, d *Delivery) outcome.Outcome

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, d *Delivery) outcome.Outcome { return f(ctx, d) }

// JSON adapts a function of a decoded payload to Handler: the payload is decoded into a T with
// encoding/json before f is called. A payload that does not decode never reaches f; the
// consumer settles it by Config.UndecodablePayload (Drop unless set) and logs it. It panics
// when f is nil, as NewConsumer does for a nil handler.
func JSON[T any](f func(ctx context.Context, d *Delivery, v T) outcome.Outcome) Handler {
	mustAdapt("JSON", f == nil)
	return HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		var v T
		if err := json.Unmarshal(d.Payload, &v); err != nil {
			d.Undecodable(fmt.Errorf("payload of row %d does not decode into %T: %w", d.ID, v, err))
			return outcome.Outcome{}
		}
		return f(ctx, d, v)
	})
}

// BatchHandler handles the rows of one batch together and says what to do with each: the
// outcome at index i is ds[i]'s. A zero outcome, or one missing from a short slice, is a
// Retry; outcomes beyond the batch are ignored; the consumer logs both. Batches hold at most the size given to NewBatchConsumer and at
// least one row.
//
// The context is cancelled as a Handler's is, and with a cause wrapping ErrLeaseLost when an
// extension finds the hold of any of the batch's rows lost.
//
// In transactional mode the deliveries share one transaction (each Delivery.Tx is the same):
// the writes made through it commit only when every outcome is Ack; any other outcome rolls
// them all back, and the batch's Acks are then retried, since their writes did not land.
type BatchHandler interface {
	HandleBatch(ctx context.Context, ds []*Delivery) []outcome.Outcome
}

// BatchHandlerFunc adapts a function to BatchHandler.
type BatchHandlerFunc func(ctx context.Context, ds []*Delivery) []outcome.Outcome

// HandleBatch calls f.
func (f BatchHandlerFunc) HandleBatch(ctx context.Context, ds []*Delivery) []outcome.Outcome {
	return f(ctx, ds)
}

// JSONBatch adapts a function of decoded payloads to BatchHandler: each payload is decoded into
// a T with encoding/json, and f receives the rows that decode with their values (vs[i] is
// ds[i]'s). A row whose payload does not decode never reaches f; the consumer settles it by
// Config.UndecodablePayload and logs it. f is not called when no row decodes. It panics when f
// is nil.
func JSONBatch[T any](f func(ctx context.Context, ds []*Delivery, vs []T) []outcome.Outcome) BatchHandler {
	mustAdapt("JSONBatch", f == nil)
	return BatchHandlerFunc(func(ctx context.Context, ds []*Delivery) []outcome.Outcome {
		good := make([]*Delivery, 0, len(ds))
		vs := make([]T, 0, len(ds))
		at := make([]int, 0, len(ds)) // good[j] is ds[at[j]]
		for i, d := range ds {
			var v T
			if err := json.Unmarshal(d.Payload, &v); err != nil {
				d.Undecodable(fmt.Errorf("payload of row %d does not decode into %T: %w", d.ID, v, err))
				continue
			}
			good, vs, at = append(good, d), append(vs, v), append(at, i)
		}
		outs := make([]outcome.Outcome, len(ds))
		if len(good) == 0 {
			return outs
		}
		for j, o := range f(ctx, good, vs) {
			if j < len(at) {
				outs[at[j]] = o
			}
		}
		return outs
	})
}

// Func adapts a handler that returns an error to Handler, the way Go handlers are often
// written: nil acks the row, and an error retries it by the consumer's policy, unless it is
// marked by Permanent (the row dies at once) or RetryIn (it retries after the delay given); see
// Result. The error's text is kept in last_error where the table has the column. It panics when
// f is nil.
func Func(f func(ctx context.Context, d *Delivery) error) Handler {
	mustAdapt("Func", f == nil)
	return HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome { return Result(f(ctx, d)) })
}

// JSONFunc is JSON for a function that returns an error, settled as Func settles it. It panics
// when f is nil.
func JSONFunc[T any](f func(ctx context.Context, d *Delivery, v T) error) Handler {
	mustAdapt("JSONFunc", f == nil)
	return JSON(func(ctx context.Context, d *Delivery, v T) outcome.Outcome { return Result(f(ctx, d, v)) })
}

// JSONBatchFunc is JSONBatch for a function that returns an error per row (errs[i] is ds[i]'s),
// each settled as Func settles it: nil acks. A short slice leaves the rows past its end without
// an outcome, which the consumer retries and logs, as for JSONBatch. It panics when f is nil.
func JSONBatchFunc[T any](f func(ctx context.Context, ds []*Delivery, vs []T) []error) BatchHandler {
	mustAdapt("JSONBatchFunc", f == nil)
	return JSONBatch(func(ctx context.Context, ds []*Delivery, vs []T) []outcome.Outcome {
		errs := f(ctx, ds, vs)
		outs := make([]outcome.Outcome, len(errs))
		for i, err := range errs {
			outs[i] = Result(err)
		}
		return outs
	})
}

// mustAdapt panics, naming the adapter, when it was given a nil func: the handler it would
// return could only panic at every delivery (see NewConsumer).
func mustAdapt(adapter string, nilFunc bool) {
	if nilFunc {
		panic("inbox: " + adapter + " of a nil func: give it the function that handles the rows")
	}
}
