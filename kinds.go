package inbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/outcome"
)

// JobArgs are the arguments of a kind of job: a Go type whose Kind method names the kind, the
// same for every value of the type (it is read once from the type's zero value). Job publishes
// a value as a row of that kind, its arguments as JSON; Handle registers the handler that
// receives them. A type may also declare its kind's options with a method
// KindOptions() KindOptions.
type JobArgs interface {
	Kind() string
}

// KindOptions are a kind's own settings. Each left zero takes its default: the message's, for
// Queue and Priority, and the consumer's Config for the others. A JobArgs type declares them by
// a method KindOptions() KindOptions, read once from the type's zero value.
type KindOptions struct {
	// Queue is the queue Job publishes the kind's jobs to. Default "".
	Queue string
	// Priority is the priority Job gives the kind's jobs, smaller first. Default 0.
	Priority int
	// MaxAttempts is the kind's attempt limit, in place of Config.MaxAttempts: its rows die at
	// it, and no claim takes one that reached it. Below zero: no limit.
	MaxAttempts int
	// Retry is the kind's retry policy, in place of Config.Retry.
	Retry RetryPolicy
	// Timeout bounds each handler call of the kind, in place of Config.HandlerTimeout. Below
	// zero: no bound.
	Timeout time.Duration
}

// optioned is a JobArgs type that declares its kind's options.
type optioned interface{ KindOptions() KindOptions }

// kindOf returns the kind and options A declares, read from its zero value.
func kindOf[A JobArgs]() (string, KindOptions) {
	var a A
	var o KindOptions
	if d, ok := any(a).(optioned); ok {
		o = d.KindOptions()
	}
	return a.Kind(), o
}

// UniqueKeyer is a JobArgs type whose jobs carry a unique key by default: Job sets the
// message's UniqueKey to args.UniqueKey() (see Table.UniqueKey), so that a kind declares once
// which of its jobs are the same job ("invoice:" + the invoice's id). An empty key is no key.
type UniqueKeyer interface{ UniqueKey() string }

// Job returns the message that publishes args as a job of its kind: Kind is args.Kind(), the
// payload args encoded by encoding/json, Queue and Priority are its kind's options
// (KindOptions), and UniqueKey is args.UniqueKey() where A is a UniqueKeyer. Set the message's other fields (Delay or RunAt, Headers, Columns) on the value
// it returns. Arguments that do not encode fail the Enqueue that publishes the message, naming
// the kind, and nothing of that Enqueue lands.
func Job[A JobArgs](args A) Message {
	kind, o := kindOf[A]()
	m := Message{Kind: kind, Queue: o.Queue, Priority: o.Priority}
	if u, ok := any(args).(UniqueKeyer); ok {
		m.UniqueKey = u.UniqueKey()
	}
	if m.Payload, m.err = json.Marshal(args); m.err != nil {
		m.err = sentinel.Errorf(nil, "", "job of kind %q: encoding its arguments (%T): %w", kind, args, m.err)
	}
	return m
}

// Kinds runs the jobs of a table with a Kind column by their kind, each by the handler
// registered for it with Handle and under its kind's options. Give it to NewConsumer as the
// handler: the consumer then claims the rows of the registered kinds alone (the claim names
// them), so that rows of kinds it does not run are never claimed, retried or killed by it, and
// wait for a consumer that runs them. A consumer of a table without a Kind column refuses it
// at Run. Register every kind before the consumer runs; a Kinds serves any number of
// consumers.
type Kinds struct {
	byKind map[string]*kind
}

// kind is a kind registered with a Kinds.
type kind struct {
	name string
	opts KindOptions
	run  func(ctx context.Context, d *Delivery) outcome.Outcome
}

// Handle registers h as the handler of the jobs of A's kind in k, under the options A
// declares (KindOptions). h receives each job's arguments decoded by encoding/json; its error
// is the job's outcome as Result reads it: nil is an Ack, an error made by Permanent fails the
// row at once, RetryIn retries it after a delay, any other error retries it by the retry
// policy. Arguments that do not decode fail the row at once, with the decode error as its last
// error: running it again cannot mend them.
//
// Handle panics when h is nil, the kind is empty, or k has a handler for it already: each is a
// mistake in the program, which the consumer's construction should stop, as net/http's
// ServeMux panics on a pattern registered twice. A kind longer than the table's kind column
// holds is refused when the consumer starts (ErrSchema).
func Handle[A JobArgs](k *Kinds, h func(ctx context.Context, d *Delivery, args A) error) {
	name, o := kindOf[A]()
	var zero A
	switch {
	case h == nil:
		panic(fmt.Sprintf("inbox: Handle of kind %q (%T): the handler is nil", name, zero))
	case name == "":
		panic(fmt.Sprintf("inbox: Handle of %T: its Kind is empty: give the kind a name", zero))
	case k.byKind[name] != nil:
		panic(fmt.Sprintf("inbox: Handle of kind %q (%T): the kind has a handler already: register each kind once", name, zero))
	}
	if k.byKind == nil {
		k.byKind = map[string]*kind{}
	}
	k.byKind[name] = &kind{name: name, opts: o, run: func(ctx context.Context, d *Delivery) outcome.Outcome {
		var args A
		if err := json.Unmarshal(d.Payload, &args); err != nil {
			return outcome.Fail(fmt.Errorf("decoding the arguments of kind %q into %s: %w", name, reflect.TypeOf(args), err))
		}
		return Result(h(ctx, d, args))
	}}
}

// Handle runs d by the handler of its kind. A row of a kind k has no handler for, which the
// consumer's claims do not take, is retried, its error naming the kind.
func (k *Kinds) Handle(ctx context.Context, d *Delivery) outcome.Outcome {
	r := k.byKind[d.Kind]
	if r == nil {
		return outcome.Retry().WithError(fmt.Errorf("no handler is registered for kind %q", d.Kind))
	}
	return r.run(ctx, d)
}

// Names returns the kinds registered, in name order.
func (k *Kinds) Names() []string {
	names := make([]string, 0, len(k.byKind))
	for name := range k.byKind {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// options returns the options of d's kind, and whether it has a kind k knows.
func (k *Kinds) options(kind string) (KindOptions, bool) {
	r := k.byKind[kind]
	if r == nil {
		return KindOptions{}, false
	}
	return r.opts, true
}

// claimed returns the kinds a consumer with the attempt limit maxAttempts claims through k,
// each with its own limit, ordered by limit, then name (Binding.Kinds).
func (k *Kinds) claimed(maxAttempts int) []ClaimedKind {
	out := make([]ClaimedKind, 0, len(k.byKind))
	for name, r := range k.byKind {
		out = append(out, ClaimedKind{Kind: name, MaxAttempts: limitOf(r.opts.MaxAttempts, maxAttempts)})
	}
	slices.SortFunc(out, func(a, b ClaimedKind) int {
		return cmp.Or(cmp.Compare(a.MaxAttempts, b.MaxAttempts), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

// limitOf is a kind's attempt limit: its own (below zero: none, 0) or the consumer's.
func limitOf(own, consumer int) int {
	switch {
	case own < 0:
		return 0
	case own > 0:
		return own
	}
	return consumer
}

// checkKinds refuses a consumer that runs jobs by kind (its handler a *Kinds) on a table without
// a Kind column, whose rows name no kind, or with no kind registered, which would claim
// nothing.
func (c *Consumer) checkKinds(plan Plan) error {
	switch {
	case c.kinds == nil:
		return nil
	case plan.Described.Kind == "":
		return sentinel.Errorf(ErrSchema, sentinel.Queue(plan.Table, c.cfg.Queue), "inbox.Kinds needs a Kind column: add one and name it in inbox.Table.Kind")
	case len(c.kinds.byKind) == 0:
		return sentinel.Errorf(nil, sentinel.Queue(plan.Table, c.cfg.Queue), "no kind is registered with the consumer's inbox.Kinds: register each with inbox.Handle before Run")
	}
	return nil
}
