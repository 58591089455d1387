package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// Config configures a Consumer. A nil *Config, and every zero field, takes the default.
type Config struct {
	// Queue is the queue the consumer claims from, a value of the table's queue column
	// (Table.Queue). It is ignored where the table has none (the table is one queue).
	Queue string
	// Workers is how many handlers run at once. Default 1. Where the form holds a connection
	// per delivery (row lock, advisory, and every form in transactional mode), the consumer
	// runs at most the pool's MaxOpenConns less one (less two for the lease form, which keeps a
	// connection of its own), so the application always has a connection; it says so in the log
	// when it runs fewer than asked.
	Workers int
	// PollInterval bounds how long a worker waits after a claim that found nothing, or failed,
	// before it claims again: each wait is drawn anew, uniformly from PollInterval/2 up to (not
	// including) PollInterval, so that workers that went idle together do not poll together but
	// spread their claims over the interval. A publish through this library in the same process
	// wakes the table's consumers at once, and so does Wakeups where set. Where the table has a
	// RetryAfter column, a worker whose claim found nothing asks when the queue's next delayed
	// row falls due, and claims then where that comes before its poll. Default 1 s.
	PollInterval time.Duration
	// Wakeups wakes idle workers when another process publishes: pgnotify.Listener on
	// Postgres, DataVersionWaker on SQLite. Nil: rows other processes publish wait for a poll.
	Wakeups Waker
	// ShutdownTimeout is how long Run lets handlers in work finish once its context is done.
	// Then it cancels their context and abandons them: each abandoned row returns to the queue
	// by its form's rule (at once for the row lock and advisory forms, or in transactional mode
	// once a statement the handler still runs on Delivery.Tx is done, since its transaction
	// cannot end before; the lease form clears its lease at once). Run returns within about a
	// second of the timeout whatever the handlers do: what is still giving rows back or closing
	// the form then finishes in the background, and the form can be run again once it has.
	// Default 30 s.
	ShutdownTimeout time.Duration
	// Transactional lends each delivery a transaction (Delivery.Tx) opened at the dialect's
	// level: Ack commits the handler's writes with the settlement, every other outcome rolls
	// them back.
	Transactional bool
	// Logger receives the consumer's and the form's logs. Nil discards them.
	Logger *slog.Logger
	// Clock is what the forms read the time from, for every time they write or compare (lease
	// expiries, retry_after, processed_at). Nil: this host's clock. A *DatabaseClock follows the
	// database server's clock instead, so that consumers on hosts whose clocks disagree agree on
	// leases; Run syncs it first. Enqueue's Delay counts from the publishing host's clock.
	Clock Clock
	// UndecodablePayload settles a delivery whose payload the JSON adapter could not decode. The
	// zero value means outcome.Drop(). The consumer logs every such payload.
	UndecodablePayload outcome.Outcome
	// Observer is told of every claim, every unit handed to the handler and its settlement
	// (metrics, traces), and gives the handler its context. Nil: nothing is told.
	Observer Observer
	// Retry is the retry policy: how long a row waits after a Retry, the zero outcome, a panic,
	// a handler's error (Func) or a failed settlement. An explicit outcome.RetryAfter keeps its
	// own delay. Nil: ExponentialBackoff{Base: time.Second, Max: time.Hour}. A policy that
	// delays needs the table's RetryAfter column: without one Run refuses it (ErrSchema) unless
	// it is RetryAtOnce.
	Retry RetryPolicy
	// MaxAttempts is the attempt limit: a row delivered MaxAttempts times whose outcome would
	// retry it dies instead (stamped dead_at, with its last error, or dropped and logged where
	// the table has no DeadAt column). Zero: DefaultMaxAttempts (25); negative: no limit. Where
	// the table has no Attempt column attempts are not counted, and there is no limit.
	MaxAttempts int
}

// Consumer claims rows of one queue through a form and runs a handler for each row, or for each
// batch of rows. Create it with NewConsumer or NewBatchConsumer; Run does the work.
type Consumer struct {
	db   *sql.DB
	form Form
	h    Handler
	cfg  Config
	log  *slog.Logger

	batches   BatchForm // set by NewBatchConsumer: the form, claiming batches
	bh        BatchHandler
	batchSize int

	life          lifecycle   // the table's lifecycle columns, as the form's plan said at Run
	warnedNoDelay atomic.Bool // a RetryAfter on a table without retry_after was logged
}

// NewConsumer returns a consumer of the rows form claims from db, handled one at a time by h.
func NewConsumer(db *sql.DB, form Form, h Handler, cfg *Config) *Consumer {
	c := &Consumer{db: db, form: form, h: h}
	c.configure(cfg)
	return c
}

// NewBatchConsumer returns a consumer of the rows form claims from db in batches of at most
// size rows (at least 1), each batch handled by one call of h and settled together. Each worker
// claims, handles and settles its own batch; Config.Workers batches are in work at once.
func NewBatchConsumer(db *sql.DB, form BatchForm, size int, h BatchHandler, cfg *Config) *Consumer {
	c := &Consumer{db: db, form: form, batches: form, bh: h, batchSize: max(size, 1)}
	c.configure(cfg)
	return c
}

func (c *Consumer) configure(cfg *Config) {
	if cfg != nil {
		c.cfg = *cfg
	}
	if c.cfg.Workers <= 0 {
		c.cfg.Workers = 1
	}
	if c.cfg.PollInterval <= 0 {
		c.cfg.PollInterval = time.Second
	}
	if c.cfg.ShutdownTimeout <= 0 {
		c.cfg.ShutdownTimeout = 30 * time.Second
	}
	if c.cfg.UndecodablePayload.Kind() == outcome.KindNone {
		c.cfg.UndecodablePayload = outcome.Drop()
	}
	if c.cfg.Retry == nil {
		c.cfg.Retry = ExponentialBackoff{}
	}
	if c.cfg.MaxAttempts == 0 {
		c.cfg.MaxAttempts = DefaultMaxAttempts
	}
	c.log = c.cfg.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
}

// settleTimeout bounds a claim, a settlement or a release: each runs to its end even when Run's
// context is done, so that no row is left half claimed and no outcome is cut off halfway.
const settleTimeout = 30 * time.Second

// detached gives one goroutine's operations, one at a time, a context that keeps the values of
// Run's context but not its cancellation, and that a watchdog cancels once an operation has run
// for its limit. It costs no allocation per operation, as context.WithTimeout would for every
// claim and settlement, so a message costs the consumer none.
//
// Each context has its own watchdog, which cancels that context and touches nothing else. An
// operation whose watchdog fired (Stop reports it) retires the pair, cancelled or about to be,
// and the next operation begins on a fresh one. The context outlives its operations: whatever a
// form registers on it (context.AfterFunc, a child context) it must unregister, as always.
type detached struct {
	parent   context.Context
	limit    time.Duration
	ctx      context.Context // nil before the first operation and after a watchdog fired
	cancel   context.CancelFunc
	watchdog *time.Timer
}

func newDetached(ctx context.Context, limit time.Duration) *detached {
	return &detached{parent: context.WithoutCancel(ctx), limit: limit}
}

// begin starts the watchdog and returns the context of one operation, which must call end.
func (d *detached) begin() context.Context {
	if d.ctx == nil {
		d.ctx, d.cancel = context.WithCancel(d.parent)
		d.watchdog = time.AfterFunc(d.limit, d.cancel)
	} else {
		d.watchdog.Reset(d.limit)
	}
	return d.ctx
}

// end stops the watchdog of the operation begin started.
func (d *detached) end() {
	if !d.watchdog.Stop() {
		d.cancel()
		d.ctx = nil
	}
}

// stop cancels the context, for a goroutine done with its operations: anything a form left
// watching it ends.
func (d *detached) stop() {
	if d.cancel != nil {
		d.cancel()
	}
}

// Run opens the form, then claims and handles rows until ctx is done; then it stops claiming,
// lets the handlers in work finish within Config.ShutdownTimeout, and returns nil.
//
// Where the form is an UnclaimableFinder, Run also searches the queue for rows that no claim
// takes (see the package documentation on claimable rows) at its start and then every ten
// minutes, and logs them, once for as long as they stay as they are.
//
// Before the first claim Run checks the form against the database: a missing table or column
// (ErrSchema), a server too old (ErrServerTooOld), a pair the database cannot run (ErrDialect)
// or another consumer of the same queue in this process (ErrAlreadyConsuming) fails Run at
// once. A database that cannot be reached, at startup or later, is logged and tried again within
// each PollInterval; Run keeps going and picks up again when it returns.
//
// While it runs, Run watches the pool: when every connection has been in use for 5 s with
// requests waiting for one (the handlers', the application's or its own), it says so in the log
// once, naming MaxOpenConns, and again when the pool has a connection to spare.
func (c *Consumer) Run(ctx context.Context) error {
	plan, closeForm, unqueue, err := c.open(ctx)
	if err != nil || plan == nil {
		return err
	}
	defer unqueue()
	log := c.log.With("queue", c.cfg.Queue, "table", plan.Table)
	if !plan.Described.lifecycle().RetryAfter && c.cfg.Retry != RetryAtOnce {
		closeForm()
		return fmt.Errorf("%w: queue %q of table %q: the retry policy delays retries, and the table has no RetryAfter column to hold a row until then: add a nullable timestamp column (retry_after) and name it in inbox.Table.RetryAfter, or retry at once with Config.Retry = inbox.RetryAtOnce", ErrSchema, c.cfg.Queue, plan.Table)
	}
	c.life = plan.Described.lifecycle()

	workers := c.cfg.Workers
	claimSlots := workers
	if max := c.db.Stats().MaxOpenConnections; max > 0 {
		if max < 2 {
			return fmt.Errorf("inbox: queue %q of table %q: the pool allows %d connection, which leaves none for the application: raise db.SetMaxOpenConns to at least 2", c.cfg.Queue, plan.Table, max)
		}
		deliveries := max - 1 // connections deliveries may hold: one stays free for the application
		if plan.OwnConnection {
			deliveries--
		}
		if plan.HoldsConnection && deliveries < 1 {
			return fmt.Errorf("inbox: queue %q of table %q: the pool allows %d connections: the form keeps one for its own statements and one stays free for the application, which leaves none for a delivery in work to hold: raise db.SetMaxOpenConns to at least 3", c.cfg.Queue, plan.Table, max)
		}
		if plan.HoldsConnection && workers > deliveries {
			log.Warn("inbox: running fewer workers than configured: each delivery in work holds a pooled connection, and one stays free for the application", "workers", workers, "running", deliveries, "max_open_conns", max, "form_keeps", plan.OwnConnection)
			workers = deliveries
		}
		claimSlots = min(workers, max-1)
	}
	if plan.SerialClaims || (!plan.HoldsConnection && c.batches == nil) {
		// One claim in flight takes a row for every worker waiting or settling meanwhile: the
		// claims that would otherwise run side by side, a row each, share one statement and one
		// commit. A batch claim serves its own worker only, so batches claim side by side.
		claimSlots = 1
	}

	r := &run{
		c:          c,
		plan:       *plan,
		log:        log,
		claimSlots: make(chan struct{}, claimSlots),
		handoff:    make(chan []*Delivery, workers),
		notify:     make(chan struct{}),
		slots:      make([]*slot, workers),
		failed:     map[failureKey]struct{}{},
	}
	if r.due, err = newDueWatch(c.db, *plan, c.cfg.Queue, c.cfg.Clock); err != nil {
		closeForm()
		return err
	}
	if sc, ok := c.form.(SettleClaimer); ok && c.batches == nil && !plan.HoldsConnection {
		r.settleClaimer = sc
	}
	r.handlerCtx, r.cancelHandlers = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancelHandlers()

	wakeups := make(chan struct{}, 1)
	defer listen(plan.Table, wakeups)()
	go r.relayWakeups(ctx, wakeups)
	wakerDone := make(chan struct{})
	if w := c.cfg.Wakeups; w != nil {
		go func() {
			defer close(wakerDone)
			w.Watch(ctx, plan.Table, log, r.wakeAll)
		}()
	} else {
		close(wakerDone)
	}

	for i := range r.slots {
		s := &slot{exited: make(chan struct{})}
		r.slots[i] = s
		go r.work(ctx, s)
	}
	extendDone := make(chan struct{})
	go r.extend(ctx, extendDone)
	unclaimableDone := make(chan struct{})
	if f, ok := c.form.(UnclaimableFinder); ok {
		go watchUnclaimable(ctx, f, log, unclaimableDone)
	} else {
		close(unclaimableDone)
	}
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	go r.watchPool(stopWatch, watchDone)
	defer func() {
		close(stopWatch)
		<-watchDone
	}()

	<-ctx.Done()
	// Everything after the handlers' shutdown timeout gives rows back and closes the form, which
	// may wait for a statement a handler runs on a connection the form also uses (database/sql
	// closes a prepared statement only once each connection it was prepared on is free). Run
	// does not wait for that longer than shutdownGrace: the rest finishes in the background.
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		r.shutdown()
		<-extendDone
		<-unclaimableDone
		<-wakerDone
		closeForm()
	}()
	grace := time.NewTimer(c.cfg.ShutdownTimeout + shutdownGrace)
	defer grace.Stop()
	select {
	case <-finished:
	case <-grace.C:
		log.Warn("inbox: giving rows back and closing the form outlast the shutdown timeout, waiting for statements the abandoned handlers still run; Run returns and they finish in the background, the form free again once they have", "shutdown_timeout", c.cfg.ShutdownTimeout)
	}
	return nil
}

// shutdownGrace bounds how long Run waits, after the shutdown timeout, for the form to give the
// abandoned rows back and close.
const shutdownGrace = time.Second

// open opens the form, retrying while the database cannot be reached, and claims the queue in
// this process. It returns a nil plan when ctx ends first. closeForm closes the form and lets
// another consumer open it; unqueue lets another consumer claim the queue.
func (c *Consumer) open(ctx context.Context) (plan *Plan, closeForm, unqueue func(), err error) {
	if err := claimForm(c.form); err != nil {
		return nil, nil, nil, err
	}
	q := Queue{Name: c.cfg.Queue, Transactional: c.cfg.Transactional, Logger: c.log, Clock: c.cfg.Clock, Backoff: c.backoff}
	for {
		plan, err := c.form.Open(ctx, c.db, q)
		if err == nil {
			unqueue, err := claimQueue(c.db, plan.Table, c.cfg.Queue)
			if s, ok := c.cfg.Clock.(interface{ Sync(context.Context) error }); ok && err == nil {
				if err = s.Sync(ctx); err != nil {
					unqueue()
					err = fmt.Errorf("inbox: queue %q of table %q: %w", c.cfg.Queue, plan.Table, err)
				}
			}
			if err != nil {
				c.form.Close()
				releaseForm(c.form)
				return nil, nil, nil, err
			}
			return &plan, func() {
				if err := c.form.Close(); err != nil {
					c.log.Error("inbox: closing the form", "queue", c.cfg.Queue, "table", plan.Table, "err", err)
				}
				releaseForm(c.form)
			}, unqueue, nil
		}
		if fatal(err) {
			releaseForm(c.form)
			return nil, nil, nil, err
		}
		c.log.Error("inbox: opening the consumer failed; trying again", "queue", c.cfg.Queue, "err", err, "in", c.cfg.PollInterval)
		select {
		case <-ctx.Done():
			releaseForm(c.form)
			return nil, nil, nil, nil
		case <-time.After(c.cfg.PollInterval):
		}
	}
}

// fatal reports an error that trying again cannot mend: the description, the dialect, the
// server version, or another consumer of the queue.
func fatal(err error) bool {
	for _, e := range []error{ErrSchema, ErrDialect, ErrServerTooOld, ErrAlreadyConsuming} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// consuming records the forms and queues consumed in this process.
var consuming struct {
	sync.Mutex
	forms  map[Form]bool
	queues map[queueKey]bool
}

type queueKey struct {
	db           *sql.DB
	table, queue string
}

func claimForm(f Form) error {
	consuming.Lock()
	defer consuming.Unlock()
	if consuming.forms[f] {
		return fmt.Errorf("%w: this form value is already opened by a running consumer: build one form per consumer", ErrAlreadyConsuming)
	}
	if consuming.forms == nil {
		consuming.forms = map[Form]bool{}
	}
	consuming.forms[f] = true
	return nil
}

func releaseForm(f Form) {
	consuming.Lock()
	defer consuming.Unlock()
	delete(consuming.forms, f)
}

func claimQueue(db *sql.DB, table, queue string) (stop func(), err error) {
	key := queueKey{db, table, queue}
	consuming.Lock()
	defer consuming.Unlock()
	if consuming.queues[key] {
		return nil, fmt.Errorf("%w: queue %q of table %q already has a consumer in this process: run one consumer with more Workers", ErrAlreadyConsuming, queue, table)
	}
	if consuming.queues == nil {
		consuming.queues = map[queueKey]bool{}
	}
	consuming.queues[key] = true
	return func() {
		consuming.Lock()
		defer consuming.Unlock()
		delete(consuming.queues, key)
	}, nil
}

// run is one Run of a consumer.
type run struct {
	c    *Consumer
	plan Plan
	log  *slog.Logger

	claimSlots    chan struct{}    // a token per claim allowed in flight
	handoff       chan []*Delivery // rows claimed by one worker for others, a unit of one each
	waiting       atomic.Int32     // workers waiting for a row, whom a claim takes rows for
	settling      atomic.Int32     // workers settling, who will want a row in a moment
	failing       sync.Mutex       // guards claimsFailing
	claimsFailing bool

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced to wake every idle worker

	handlerCtx     context.Context // handlers' context: cancelled when the shutdown timeout runs out
	cancelHandlers context.CancelFunc

	slots []*slot

	settleClaimer SettleClaimer // the form, where a worker's settlement may claim its next row
	due           *dueWatch     // when the next delayed row falls due; nil without a RetryAfter column

	failedMu sync.Mutex
	failed   map[failureKey]struct{} // failed settlements logged at ERROR
}

// slot is one worker's state, shared with the extender and with shutdown.
type slot struct {
	mu        sync.Mutex
	inWork    []*Delivery // the unit whose handler runs, nil otherwise
	abandoned bool        // shutdown gave inWork's rows back; the worker must not settle them
	exited    chan struct{}

	outs    []outcome.Outcome  // the worker's outcomes of its unit in work, reused
	applied []outcome.Outcome  // the outcomes a transactional batch applies, for the observer
	one     [1]outcome.Outcome // a single handler's outcome, reused

	// The worker's handler context, a child of the run's, which the extender cancels when it
	// finds the hold of the unit in work lost. Replaced only once cancelled, so that a delivery
	// costs no allocation; written by the worker under mu.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// relayWakeups turns a publish's wake-up into a broadcast to the idle workers.
func (r *run) relayWakeups(ctx context.Context, wakeups <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wakeups:
			r.wakeAll()
		}
	}
}

func (r *run) wakeAll() {
	r.notifyMu.Lock()
	close(r.notify)
	r.notify = make(chan struct{})
	r.notifyMu.Unlock()
}

func (r *run) notified() <-chan struct{} {
	r.notifyMu.Lock()
	defer r.notifyMu.Unlock()
	return r.notify
}

// work is one worker: take a unit (handed over by another worker, or claimed), handle it,
// settle it, until ctx is done.
func (r *run) work(ctx context.Context, s *slot) {
	defer close(s.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	ops := newDetached(ctx, settleTimeout)
	defer ops.stop()
	var kept []*Delivery // single rows this worker claimed and could not hand over
	defer func() {
		for i := range kept {
			r.release(kept[i : i+1 : i+1])
		}
	}()
	for ctx.Err() == nil {
		var u []*Delivery
		if len(kept) > 0 {
			// Capped at its one row, so that no append to the unit can write over the rows kept.
			u, kept = kept[:1:1], kept[1:]
		} else if u, kept = r.next(ctx, ops, timer); u == nil {
			continue
		}
		if ctx.Err() != nil {
			r.release(u)
			return
		}
		mayClaim := len(kept) == 0
		next, ok := r.deliver(ctx, ops, s, u, mayClaim)
		if !ok {
			return
		}
		if mayClaim {
			kept = next
		}
	}
}

// next returns the worker's next unit: one handed over by another worker, or the first of a
// claim. Where deliveries hold no connection, a single-row claim takes a row for this worker
// and one for each worker waiting or settling (who will want one as soon as its settlement
// commits), and hands those over; the rows no one can take are returned to keep. A batch claim
// takes one batch, for this worker. After a claim that found nothing (or failed) next idles
// (see idle) and returns nil, or the row another worker handed over meanwhile.
func (r *run) next(ctx context.Context, ops *detached, timer *time.Timer) (unit, kept []*Delivery) {
	select {
	case u := <-r.handoff:
		return u, nil
	default:
	}
	r.waiting.Add(1)
	select {
	case u := <-r.handoff:
		r.waiting.Add(-1)
		return u, nil
	case <-ctx.Done():
		r.waiting.Add(-1)
		return nil, nil
	case r.claimSlots <- struct{}{}:
		r.waiting.Add(-1)
	}
	// A row handed over while this worker took the slot goes first: it is claimed already, and
	// waiting it is not extended.
	select {
	case u := <-r.handoff:
		<-r.claimSlots
		return u, nil
	default:
	}
	// Taken before the claim: a publish that lands after the claim looked wakes this worker.
	woken := r.notified()
	ds, err := r.claim(ops)
	if err != nil {
		woken = nil
	}
	if err != nil || len(ds) == 0 {
		return r.idle(ctx, ops, timer, woken), nil
	}
	if r.c.batches != nil {
		return ds, nil
	}
	rest := ds[1:]
	for len(rest) > 0 {
		select {
		case r.handoff <- rest[:1:1]:
			rest = rest[1:]
			continue
		default:
		}
		break
	}
	return ds[:1:1], rest
}

// idle waits a poll wait, or until ctx is done, woken is closed (a publish since the claim,
// where it is not nil) or another worker hands a row over, which it returns. After a claim
// that found nothing (woken not nil) it waits no longer than until the queue's next delayed row
// falls due.
func (r *run) idle(ctx context.Context, ops *detached, timer *time.Timer, woken <-chan struct{}) []*Delivery {
	wait := r.c.pollWait()
	if woken != nil {
		if r.due != nil {
			until, ok := r.due.until(ops.begin())
			ops.end()
			if ok && until < wait {
				wait = max(until, 0)
			}
		}
	}
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	timer.Reset(wait)
	defer timer.Stop() // since Go 1.23 a stopped timer delivers no stale tick
	select {
	case u := <-r.handoff:
		return u
	case <-ctx.Done():
	case <-woken:
	case <-timer.C:
	}
	return nil
}

// pollWait is how long an idle worker waits before it claims again, as Config.PollInterval says.
func (c *Consumer) pollWait() time.Duration {
	half := c.cfg.PollInterval / 2
	return half + rand.N(c.cfg.PollInterval-half)
}

// claim claims the worker's batch, or single rows: its own, and where deliveries hold no
// connection one for each worker waiting or settling. It holds the claim slot the caller took
// meanwhile. The claim runs on a detached context, to its end even when Run's context is
// done, so that no row is left half claimed.
func (r *run) claim(ops *detached) ([]*Delivery, error) {
	cctx := ops.begin()
	began := r.now()
	var ds []*Delivery
	var err error
	if r.c.batches != nil {
		ds, err = r.c.batches.ClaimBatch(cctx, r.c.batchSize)
	} else {
		n := 1
		if !r.plan.HoldsConnection {
			n += int(r.waiting.Load() + r.settling.Load())
		}
		ds, err = r.c.form.Claim(cctx, n)
	}
	r.observeClaim(cctx, ds, began, err)
	ops.end()
	<-r.claimSlots
	r.noteClaim(err)
	return ds, err
}

// noteClaim logs the first of a run of failed claims, and the claim that ends the run.
func (r *run) noteClaim(err error) {
	r.failing.Lock()
	defer r.failing.Unlock()
	switch {
	case err != nil && !r.claimsFailing:
		r.claimsFailing = true
		r.log.Error("inbox: claim failed; trying again within each poll interval", "err", err, "poll_interval", r.c.cfg.PollInterval)
	case err == nil && r.claimsFailing:
		r.claimsFailing = false
		r.log.Info("inbox: claims succeed again")
	}
}

// deliver runs the handler on unit u and settles its outcomes on a detached context. When the
// worker would claim next (mayClaim) and the form can, the settlement claims the worker's next
// row with it, which deliver returns. It reports false when shutdown abandoned the unit, and the
// worker must stop.
func (r *run) deliver(ctx context.Context, ops *detached, s *slot, u []*Delivery, mayClaim bool) ([]*Delivery, bool) {
	s.mu.Lock()
	if s.ctx == nil || s.ctx.Err() != nil {
		s.ctx, s.cancel = context.WithCancelCause(r.handlerCtx)
	}
	s.inWork = u
	s.mu.Unlock()

	hctx, began := r.observeHandling(s.ctx, u)
	outs := r.handle(hctx, s, u)

	s.mu.Lock()
	if s.abandoned {
		s.mu.Unlock()
		r.observeSettled(hctx, s, u, outs, began, r.now(), errAbandoned)
		return nil, false
	}
	s.inWork = nil
	s.mu.Unlock()

	sctx := ops.begin()
	settling := r.now()
	var err error
	var next []*Delivery
	switch {
	case r.c.batches != nil:
		err = r.c.batches.SettleBatch(sctx, u, outs)
	case mayClaim && r.fuse(ctx):
		var claimErr error
		next, err, claimErr = r.settleClaimer.SettleAndClaim(sctx, u[0], outs[0], 1)
		r.observeClaim(sctx, next, settling, claimErr)
		<-r.claimSlots
		r.noteClaim(claimErr)
	default:
		r.settling.Add(1)
		err = r.c.form.Settle(sctx, u[0], outs[0])
		r.settling.Add(-1)
	}
	r.observeSettled(hctx, s, u, outs, began, settling, err)
	ops.end()
	switch {
	case errors.Is(err, ErrLeaseLost):
		lost := ids(u)
		var batch *LeaseLostError
		if errors.As(err, &batch) {
			lost = batch.IDs
		}
		r.log.Warn("inbox: lease lost before settlement; these rows were not changed and another consumer may hold them", "ids", lost, "err", err)
	case errors.Is(err, ErrCommitUnknown):
		r.log.Error("inbox: settlement outcome unknown: its COMMIT was sent and no answer came back; the rows are settled, or else return to the queue by their form's rule", "ids", ids(u), "err", err)
	case errors.Is(err, ErrClosed), errors.Is(err, ErrTransactionHeld), errors.Is(err, ErrTransactionEnded):
		r.log.Error("inbox: settlement failed; the rows return to the queue by their form's rule", "ids", ids(u), "err", err)
	case err != nil:
		r.settleFailed(u, err)
	}
	if err == nil {
		for i, o := range outs {
			r.settled(u[i], o)
		}
	}
	return next, true
}

// settled logs what ends a row's life in the queue other than an Ack: a Drop with its reason,
// a row dead.
func (r *run) settled(d *Delivery, o outcome.Outcome) {
	switch o.Kind() {
	case outcome.KindDrop:
		why := "dropped by the handler"
		if o.Err() != nil {
			why = o.Err().Error()
		}
		r.log.Info("inbox: message dropped", "id", d.ID, "attempt", d.Attempt, "reason", why)
	case outcome.KindFail:
		r.log.Warn("inbox: row is dead: it stays in the table, stamped dead_at, and is never claimed again", "id", d.ID, "attempt", d.Attempt, "last_error", o.Err())
	}
}

// settleFailed logs a settlement that failed for a reason of its own (a statement the database
// refused): the form backed its rows off by the retry policy. The same error for the same rows
// is logged once at ERROR, and again at DEBUG, so that a settlement that can never commit says
// why once and does not fill the log.
func (r *run) settleFailed(u []*Delivery, err error) {
	msg := "inbox: settlement failed; the rows back off by the retry policy, their attempt counted, and the error kept as their last"
	key := failureKey{u[0].ID, err.Error()}
	r.failedMu.Lock()
	_, seen := r.failed[key]
	if !seen {
		if len(r.failed) >= failuresKept {
			clear(r.failed)
		}
		r.failed[key] = struct{}{}
	}
	r.failedMu.Unlock()
	if seen {
		r.log.Debug(msg, "ids", ids(u), "err", err)
		return
	}
	r.log.Error(msg+" (said once per row and error)", "ids", ids(u), "err", err)
}

// failureKey names a failed settlement: its first row and its error's text.
type failureKey struct {
	id  int64
	err string
}

// failuresKept bounds the failed settlements a run remembers having logged.
const failuresKept = 1024

// errNoOutcome is the reason of a row whose handler gave no outcome.
var errNoOutcome = errors.New("the handler gave the row no outcome")

// resolve applies the retry policy and the attempt limit to o, the outcome of d, and returns
// what the form is to apply: a retry becomes a RetryAfter by the policy (a Retry at once where
// the table has no retry_after column, which an explicit RetryAfter then is too, logged once
// per consumer); a retry past the attempt limit becomes a Fail with "attempt n of m: <reason>";
// a Fail on a table without dead_at becomes a Drop, logged at ERROR. Ack and Drop pass as they
// are, and cost nothing.
func (c *Consumer) resolve(d *Delivery, o outcome.Outcome) outcome.Outcome {
	switch o.Kind() {
	case outcome.KindAck, outcome.KindDrop:
		return o
	case outcome.KindNone:
		o = outcome.Retry().WithError(errNoOutcome)
	}
	if o.Kind() != outcome.KindFail && c.life.Attempt && c.cfg.MaxAttempts > 0 && d.Attempt >= c.cfg.MaxAttempts {
		why := o.Err()
		if why == nil {
			why = errors.New("retried by the handler")
		}
		o = outcome.Fail(fmt.Errorf("attempt %d of %d: %w", d.Attempt, c.cfg.MaxAttempts, why))
	}
	switch o.Kind() {
	case outcome.KindFail:
		if !c.life.DeadAt {
			c.log.Error("inbox: row dies and is dropped, since the table has no DeadAt column: name one (a nullable timestamp) in inbox.Table.DeadAt to keep dead rows", "queue", c.cfg.Queue, "id", d.ID, "attempt", d.Attempt, "last_error", o.Err())
			return outcome.Drop().WithError(o.Err())
		}
	case outcome.KindRetry:
		if c.life.RetryAfter {
			return outcome.RetryAfter(c.cfg.Retry.Delay(d.Attempt)).WithError(o.Err())
		}
	case outcome.KindRetryAfter:
		if !c.life.RetryAfter {
			if !c.warnedNoDelay.Swap(true) {
				c.log.Warn("inbox: RetryAfter on a table without a retry_after column retries at once (said once per consumer): add the column and name it in inbox.Table.RetryAfter", "queue", c.cfg.Queue, "id", d.ID, "delay", o.Delay())
			}
			return outcome.Retry().WithError(o.Err())
		}
	}
	return o
}

// backoff is what a form applies to d when its settlement failed with err (Queue.Backoff): a
// retry by the policy, or a Fail past the attempt limit, with the settlement's error as the
// row's last.
func (c *Consumer) backoff(d *Delivery, err error) outcome.Outcome {
	return c.resolve(d, outcome.Retry().WithError(fmt.Errorf("settlement failed: %w", err)))
}

// fuse reports whether a worker that settles should claim its next row in the same call, and
// if so takes the claim slot for it: only when the form can, and no other worker waits for a
// row or settles, so that no claim or settlement would be shared by running them apart.
func (r *run) fuse(ctx context.Context) bool {
	if r.settleClaimer == nil || ctx.Err() != nil || len(r.handoff) > 0 || r.waiting.Load() > 0 || r.settling.Load() > 0 {
		return false
	}
	select {
	case r.claimSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

func ids(u []*Delivery) []int64 {
	out := make([]int64, len(u))
	for i, d := range u {
		out[i] = d.ID
	}
	return out
}

// handle calls the handler on u with ctx and returns an outcome per delivery: a panic and a
// missing outcome become Retry, and a row whose data does not decode (as the form or the JSON
// adapter found) takes Config.UndecodablePayload. Rows the form found undecodable never reach
// the handler.
func (r *run) handle(ctx context.Context, s *slot, u []*Delivery) []outcome.Outcome {
	// The worker's buffers: a delivery costs the consumer no allocation of its own.
	s.outs = slices.Grow(s.outs[:0], len(u))[:len(u)]
	outs := s.outs
	pass := u
	for i, d := range u {
		if d.decodeErr != nil && len(pass) == len(u) {
			pass = append([]*Delivery(nil), u[:i]...)
		} else if d.decodeErr == nil && len(pass) < len(u) {
			pass = append(pass, d)
		}
	}
	var got []outcome.Outcome
	if len(pass) > 0 {
		got = r.call(ctx, s, pass)
		if len(got) > len(pass) {
			r.log.Error("inbox: the batch handler returned more outcomes than rows; the extra ones are ignored", "rows", len(pass), "outcomes", len(got), "ids", ids(pass))
		}
	}
	j := 0
	for i, d := range u {
		var o outcome.Outcome
		if j < len(pass) && pass[j] == d {
			if j < len(got) {
				o = got[j]
			}
			j++
		}
		switch {
		case d.decodeErr != nil:
			r.log.Error("inbox: row does not decode", "id", d.ID, "err", d.decodeErr, "outcome", r.c.cfg.UndecodablePayload.String())
			o = r.c.cfg.UndecodablePayload
			if o.Err() == nil {
				o = o.WithError(d.decodeErr)
			}
		case o.Kind() == outcome.KindNone:
			r.log.Error("inbox: the handler gave the row no outcome (the zero outcome.Outcome, or none in a batch's short slice); the row will be retried", "id", d.ID)
		}
		outs[i] = r.c.resolve(d, o)
	}
	return outs
}

// stackMax bounds, in bytes, the stack a panic's log line carries.
const stackMax = 8 << 10

// call runs the handler on the deliveries with ctx, turning a panic into a Retry of each, with
// the panic as its reason. The panic is logged once, with its stack cut to stackMax bytes.
func (r *run) call(ctx context.Context, s *slot, ds []*Delivery) (outs []outcome.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			stack := outcome.Truncate(string(debug.Stack()), stackMax)
			r.log.Error("inbox: handler panicked; its rows will be retried by the retry policy", "ids", ids(ds), "attempt", ds[0].Attempt, "panic", p, "stack", stack)
			why := fmt.Errorf("handler panicked: %v", p)
			outs = make([]outcome.Outcome, len(ds))
			for i := range outs {
				outs[i] = outcome.Retry().WithError(why)
			}
		}
	}()
	if r.c.bh != nil {
		return r.c.bh.HandleBatch(ctx, ds)
	}
	s.one[0] = r.c.h.Handle(ctx, ds[0])
	return s.one[:]
}

// release gives a claimed unit back without an outcome.
func (r *run) release(u []*Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var err error
	if r.c.batches != nil {
		err = r.c.batches.ReleaseBatch(ctx, u)
	} else {
		err = r.c.form.Release(ctx, u[0])
	}
	if err != nil {
		r.log.Error("inbox: giving rows back failed; they return to the queue by their form's rule", "ids", ids(u), "err", err)
	}
}

// extend renews the hold on every unit in work each ExtendEvery, until the workers are done (a
// batch's hold is renewed through its first delivery). A unit's extension and its settlement
// never overlap: both take its slot's lock. An extension that finds the hold lost
// (ErrLeaseLost) cancels the unit's handler with that error as the cause, and the unit is not
// extended again.
func (r *run) extend(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	if r.plan.ExtendEvery <= 0 {
		<-ctx.Done()
		return
	}
	ticker := time.NewTicker(r.plan.ExtendEvery)
	defer ticker.Stop()
	ops := newDetached(ctx, r.plan.ExtendEvery)
	defer ops.stop()
	for {
		select {
		case <-r.handlerCtx.Done():
			return
		case <-ticker.C:
		}
		for _, s := range r.slots {
			s.mu.Lock()
			if u := s.inWork; u != nil && !s.abandoned && s.ctx.Err() == nil {
				err := r.c.form.Extend(ops.begin(), u[0])
				ops.end()
				switch {
				case errors.Is(err, ErrLeaseLost):
					s.cancel(err)
					r.log.Warn("inbox: lease lost while the handler ran; its context is cancelled, and its settlement will change nothing", "ids", ids(u), "err", err)
				case err != nil:
					r.log.Warn("inbox: extending a hold failed; the handler goes on, and its settlement will fail if the hold is lost", "ids", ids(u), "err", err)
				}
			}
			s.mu.Unlock()
		}
	}
}

// poolLook is how often the consumer looks at its pool, and poolWaitLimit how long every
// connection must have been in use, with requests waiting for one, before it says so.
const (
	poolLook      = time.Second
	poolWaitLimit = 5 * time.Second
)

// watchPool looks at the pool every poolLook until stop is closed, and logs a warning once per
// episode (see poolWatch) that lasts poolWaitLimit, and the end of an episode it warned of.
// database/sql counts a wait when it begins, so a wait that never ends still shows.
func (r *run) watchPool(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ticker := time.NewTicker(poolLook)
	defer ticker.Stop()
	var w poolWatch
	prev := r.c.db.Stats()
	for {
		select {
		case <-stop:
			return
		case now := <-ticker.C:
			s := r.c.db.Stats()
			switch say, lasted := w.look(now, prev, s); say {
			case poolStarved:
				r.log.Warn("inbox: every connection of the pool has been in use for "+lasted.Round(time.Second).String()+" with requests waiting for one: raise db.SetMaxOpenConns (max_open_conns) to the connections the consumer holds (consumer_holds) plus every one its handlers and the rest of the application take from db at once (a handler that holds a query open while it runs another takes two)",
					"max_open_conns", s.MaxOpenConnections, "in_use", s.InUse, "waits", s.WaitCount-w.base, "consumer_holds", r.holds())
			case poolEased:
				r.log.Info("inbox: the pool has a connection to spare again", "after", lasted.Round(time.Second))
			}
			prev = s
		}
	}
}

// holds is how many pooled connections the consumer may hold at once: one per delivery in work
// where deliveries hold one, or one for its statements, and the form's own.
func (r *run) holds() int {
	n := 1
	if r.plan.HoldsConnection {
		n = len(r.slots)
	}
	if r.plan.OwnConnection {
		n++
	}
	return n
}

// poolWatch follows the episodes in which the pool has no connection to spare and requests wait
// for one: each begins at a look that finds the pool full and a wait begun since the look
// before, and ends at the first look that finds a connection to spare.
type poolWatch struct {
	since  time.Time // the first look of the episode; zero between episodes
	base   int64     // the pool's WaitCount at the look before the episode
	warned bool
}

type poolLookout int

const (
	poolFine    poolLookout = iota
	poolStarved             // the episode has lasted poolWaitLimit with waits: warn, once
	poolEased               // an episode that was warned of has ended
)

// look takes the pool's stats s at now, prev being the stats of the look before, and returns
// what to say and how long the episode has lasted.
func (w *poolWatch) look(now time.Time, prev, s sql.DBStats) (poolLookout, time.Duration) {
	if s.MaxOpenConnections <= 0 || s.InUse < s.MaxOpenConnections {
		lasted, eased := now.Sub(w.since), w.warned
		w.since, w.warned = time.Time{}, false
		if eased {
			return poolEased, lasted
		}
		return poolFine, 0
	}
	if w.since.IsZero() {
		if s.WaitCount == prev.WaitCount {
			return poolFine, 0 // full, and no request has begun to wait
		}
		w.since, w.base = now, prev.WaitCount
	}
	lasted := now.Sub(w.since)
	if !w.warned && lasted >= poolWaitLimit {
		w.warned = true
		return poolStarved, lasted
	}
	return poolFine, lasted
}

// shutdown waits for the workers within the shutdown timeout, then cancels the handlers'
// context and abandons the handlers still running, giving their rows back.
func (r *run) shutdown() {
	deadline := time.NewTimer(r.c.cfg.ShutdownTimeout)
	defer deadline.Stop()
	for _, s := range r.slots {
		select {
		case <-s.exited:
			continue
		case <-deadline.C:
		}
		break
	}
	r.cancelHandlers()
	for _, s := range r.slots {
		s.mu.Lock()
		u := s.inWork
		if u != nil {
			s.abandoned = true
		}
		s.mu.Unlock()
		if u != nil {
			r.log.Warn("inbox: handler still running at the shutdown timeout; abandoned, its rows go back to the queue", "ids", ids(u))
			r.release(u)
			continue
		}
		<-s.exited
	}
	for {
		select {
		case u := <-r.handoff:
			r.release(u)
		default:
			return
		}
	}
}
