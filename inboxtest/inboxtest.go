// Package inboxtest helps test the handlers of an application that uses
// github.com/sqlinbox/inbox: run a handler on a delivery and see the outcome the consumer would
// settle it by (Consumer.Handle, Consumer.HandleBatch); run a consumer until its queue has no
// row due (Drain); read back what was enqueued (Enqueued). It imports the standard library only.
package inboxtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// Consumer stands for the consumer a handler runs under in production: what becomes of a row
// depends on it as much as on the handler. The retry policy delays a retry only where the table
// has a RetryAfter column, the attempt limit applies only where it has an Attempt column, and a
// row that dies is dropped where it has no DeadAt column; Config gives the policy
// (Config.Retry), the limit (Config.MaxAttempts), what an undecodable row is settled by
// (Config.UndecodablePayload) and whether a batch's writes share a transaction
// (Config.Transactional). Give it the table and the Config of the application's consumer. A
// handler that runs jobs by kind (an *inbox.Kinds, or one registered by HandleJob) is run under
// its kind's options, as the consumer runs it: the kind's attempt limit and retry policy
// (inbox.KindOptions) in place of the Config's.
type Consumer struct {
	Table  inbox.Table
	Config *inbox.Config // nil: the defaults
}

// Result is what became of one delivery handed to a handler.
type Result struct {
	// Outcome is what the consumer settles the row by, as a consumer of Consumer.Table
	// configured by Consumer.Config does, through the same code (inbox.Applied): a panic or the
	// zero outcome is a Retry, and an undecodable row (DecodeErr) takes
	// Config.UndecodablePayload (Drop by default); then a retry waits by the retry policy where
	// the table has a RetryAfter column, and is a Fail at the attempt limit; a Fail is a Drop on
	// a table without a DeadAt column.
	Outcome outcome.Outcome
	// Returned is the outcome the handler returned for the row; zero where it returned none or
	// panicked.
	Returned outcome.Outcome
	// Panic is the value the handler panicked with; nil where it did not.
	Panic any
	// DecodeErr is why the row does not decode, as the handler recorded it through
	// Delivery.Undecodable (inbox.JSON and inbox.JSONBatch do); nil where it decodes.
	DecodeErr error
}

// Delivery returns a delivery of payload at attempt, as a consumer hands it to a handler (the
// first delivery is attempt 1), with id 1 and no transaction. Set its other fields (Headers,
// Group, Tx) as the test needs.
func Delivery(payload []byte, attempt int) *inbox.Delivery {
	return &inbox.Delivery{ID: 1, Payload: payload, Attempt: attempt}
}

// JSONDelivery returns a delivery whose payload is v encoded with encoding/json, as
// inbox.JSONMessage publishes it, at attempt. It panics if v does not encode.
func JSONDelivery(v any, attempt int) *inbox.Delivery {
	payload, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("inboxtest: encoding a %T payload: %v", v, err))
	}
	return Delivery(payload, attempt)
}

// JobDelivery returns a delivery of a job of args' kind at attempt, as Handle hands it to its
// handler: Kind is the kind, and the payload args encoded by encoding/json, as inbox.Job
// publishes it. It panics if args do not encode.
func JobDelivery[A inbox.JobArgs](args A, attempt int) *inbox.Delivery {
	var zero A
	d := JSONDelivery(args, attempt)
	d.Kind = zero.Kind()
	return d
}

// Handle runs h on d with ctx, as c's consumer does, and returns what became of it. Where h is
// an *inbox.Kinds, d runs by the handler of its kind (Delivery.Kind) under the kind's options.
// It panics where the consumer's Run would refuse c (inbox.ErrSchema: a retry policy that
// delays, the default among them, on a table without a RetryAfter column; an *inbox.Kinds on a
// table without a Kind column), as a test's mistake.
func (c Consumer) Handle(ctx context.Context, h inbox.Handler, d *inbox.Delivery) Result {
	var r Result
	func() {
		defer func() { r.Panic = recover() }()
		r.Returned = h.Handle(ctx, d)
	}()
	kinds, _ := h.(*inbox.Kinds)
	return c.results(kinds, []*inbox.Delivery{d}, []Result{r})[0]
}

// HandleJob runs h, the handler of the jobs of A's kind (as inbox.Handle registers it), on a
// job of args at attempt (JobDelivery) with ctx, as c's consumer of that kind does, and returns
// what became of it: h's error read as inbox.Result reads it, then A's kind's attempt limit
// and retry policy (its KindOptions) in place of the Config's. It panics as Handle does.
func HandleJob[A inbox.JobArgs](ctx context.Context, c Consumer, h func(ctx context.Context, d *inbox.Delivery, args A) error, args A, attempt int) Result {
	var kinds inbox.Kinds
	inbox.Handle(&kinds, h)
	return c.Handle(ctx, &kinds, JobDelivery(args, attempt))
}

// HandleBatch runs h on ds with ctx, as c's batch consumer does, and returns what became of
// each (the result at index i is ds[i]'s). A panic retries every row of the batch; a row
// missing from a short slice of outcomes is retried; outcomes beyond the batch are ignored. It
// panics where Run would refuse c, as Handle does.
func (c Consumer) HandleBatch(ctx context.Context, h inbox.BatchHandler, ds []*inbox.Delivery) []Result {
	if len(ds) == 0 {
		return nil // a consumer hands a batch handler at least one row
	}
	rs := make([]Result, len(ds))
	var outs []outcome.Outcome
	var p any
	func() {
		defer func() { p = recover() }()
		outs = h.HandleBatch(ctx, ds)
	}()
	for i := range ds {
		rs[i].Panic = p
		if p == nil && i < len(outs) {
			rs[i].Returned = outs[i]
		}
	}
	return c.results(nil, ds, rs)
}

// results fills in the outcome c's consumer settles each of ds by, rs holding what the handler
// (kinds, where it runs jobs by kind) did, through inbox.Applied.
func (c Consumer) results(kinds *inbox.Kinds, ds []*inbox.Delivery, rs []Result) []Result {
	returned := make([]outcome.Outcome, len(rs))
	for i, r := range rs {
		returned[i] = r.Returned
	}
	applied, err := inbox.Applied(c.Table, c.Config, kinds, ds, returned, rs[0].Panic)
	if err != nil {
		panic(fmt.Sprintf("inboxtest: a consumer would not run: %v", err))
	}
	for i, d := range ds {
		rs[i].Outcome, rs[i].DecodeErr = applied[i], d.DecodeError()
	}
	return rs
}

// Drained is what Drain saw the consumer settle.
type Drained struct {
	// Settled counts the rows settled, by the outcome applied.
	Settled map[outcome.Kind]int
	// Failed counts the rows whose settlement failed (the observer's Settlement.Err).
	Failed int
}

// Drain builds a consumer with newConsumer, which must set the observer it is given as the
// consumer's inbox.Config.Observer, runs it until its queue has no row due, stops it, and says
// what it settled. The queue is drained once a claim that began after every settlement so far
// found no row due while no other claim ran and no claimed row was in work; rows delayed
// (RetryAfter) past then stay in the table. Drain fails when timeout passes first, when ctx is
// done, or when Run fails.
//
// When it stops the consumer before the queue is drained (timeout, ctx), Drain cancels the
// context of every handler in work as it does, rather than wait for the consumer's
// ShutdownTimeout, so it returns as soon as those handlers return and their rows are settled. A
// handler that ignores its context holds it up to the consumer's ShutdownTimeout, as it would
// hold up Run.
//
// To keep an observer of your own, call it from a wrapper of the one newConsumer is given.
func Drain(ctx context.Context, timeout time.Duration, newConsumer func(inbox.Observer) *inbox.Consumer) (Drained, error) {
	stop, stopHandlers := context.WithCancelCause(context.Background())
	defer stopHandlers(nil)
	w := &watch{drained: make(chan struct{}), got: Drained{Settled: map[outcome.Kind]int{}}, stop: stop}
	c := newConsumer(w)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	limit := time.NewTimer(timeout)
	defer limit.Stop()
	var err error
	select {
	case <-w.drained:
	case err = <-errc:
		if err == nil {
			err = ctx.Err()
		}
		return w.result(), fmt.Errorf("inboxtest: the consumer stopped before its queue was drained: %w", err)
	case <-parent.Done():
		err = fmt.Errorf("inboxtest: the queue was not drained before the context ended: %d rows claimed and not settled: %w", w.inWork(), context.Cause(parent))
	case <-limit.C:
		err = fmt.Errorf("inboxtest: the queue was not drained within %v: %d rows claimed and not settled", timeout, w.inWork())
	}
	stopHandlers(errStopped)
	cancel()
	if runErr := <-errc; runErr != nil {
		err = errors.Join(err, runErr)
	}
	return w.result(), err
}

// errStopped is the cause of a handler's context that Drain cancelled when it stopped the
// consumer.
var errStopped = fmt.Errorf("inboxtest: Drain stopped the consumer: %w", context.Canceled)

// watch is Drain's observer: it counts the rows claimed and not yet settled, notes when the
// queue is drained, and ends the handlers' contexts with stop.
type watch struct {
	mu          sync.Mutex
	working     int       // rows claimed and not settled
	lastSettled time.Time // when the last settlement was reported
	got         Drained
	drained     chan struct{}
	closed      bool
	stop        context.Context // done when Drain stops the consumer
}

func (w *watch) Claimed(_ context.Context, c inbox.Claim) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.working += c.Rows
	began := now.Add(-c.Duration)
	if c.Err == nil && c.Rows == 0 && c.Concurrent == 0 && w.working == 0 && began.After(w.lastSettled) && !w.closed {
		w.closed = true
		close(w.drained)
	}
}

// Handling returns the handler's context: ctx, and cancelled too when Drain stops the consumer.
// Settled ends it (endHandling).
func (w *watch) Handling(ctx context.Context, _ inbox.Unit) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(w.stop, func() { cancel(context.Cause(w.stop)) })
	return context.WithValue(ctx, endHandling{}, func() {
		unhook()
		cancel(nil)
	})
}

// endHandling is the key of the func that ends a handler's context Handling made, once its unit
// is settled.
type endHandling struct{}

func (w *watch) Settled(ctx context.Context, s inbox.Settlement) {
	if end, ok := ctx.Value(endHandling{}).(func()); ok {
		end()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.working -= len(s.Deliveries)
	w.lastSettled = time.Now()
	if s.Err != nil {
		w.got.Failed += len(s.Deliveries)
		return
	}
	for _, o := range s.Outcomes {
		w.got.Settled[o.Kind()]++
	}
}

func (w *watch) inWork() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.working
}

func (w *watch) result() Drained {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Drained{Settled: maps.Clone(w.got.Settled), Failed: w.got.Failed}
}

// Enqueued reads back the rows of queue in table t that are not processed (every row, where
// t has no ProcessedAt column), in id order, as messages: ID, Queue, Payload, Priority and
// Headers, each where t has the column. Delay is not read back. queue is ignored where t has
// no Queue column.
func Enqueued(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table, queue string) ([]inbox.Message, error) {
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	cols := []string{q.ID}
	for _, c := range []string{q.Payload, q.Queue, q.Priority, q.Headers} {
		if c != "" {
			cols = append(cols, c)
		}
	}
	var where []string
	var args []any
	if q.Queue != "" {
		where, args = append(where, q.Queue+" = "+d.Placeholder(1)), append(args, queue)
	}
	if q.ProcessedAt != "" {
		where = append(where, q.ProcessedAt+" IS NULL")
	}
	query := "SELECT " + strings.Join(cols, ", ") + " FROM " + q.Name
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY " + q.ID
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("inboxtest: table %q: reading the rows: %w", t.Name, err)
	}
	defer rows.Close()
	var msgs []inbox.Message
	for rows.Next() {
		var m inbox.Message
		var group sql.NullString
		var priority sql.NullInt64
		var headers []byte
		dest := []any{&m.ID}
		if t.Payload != "" {
			dest = append(dest, &m.Payload)
		}
		if t.Queue != "" {
			dest = append(dest, &group)
		}
		if t.Priority != "" {
			dest = append(dest, &priority)
		}
		if t.Headers != "" {
			dest = append(dest, &headers)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("inboxtest: table %q: reading the rows: %w", t.Name, err)
		}
		m.Queue, m.Priority = group.String, int(priority.Int64)
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &m.Headers); err != nil {
				return nil, fmt.Errorf("inboxtest: table %q, row %d: headers column %q does not hold a JSON object of strings: %w", t.Name, m.ID, t.Headers, err)
			}
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inboxtest: table %q: reading the rows: %w", t.Name, err)
	}
	return msgs, nil
}
