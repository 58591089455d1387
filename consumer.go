package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

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
//
// It panics when form or h is nil, or holds a nil pointer or func (a HandlerFunc(nil), say): a
// consumer without either can only fail, every delivery a nil-pointer panic that
// burns an attempt. That is a mistake in the program, not in its data or its database, so it is
// refused where the consumer is built, at startup, as net/http refuses a nil handler, rather than
// by an error from Run that a retry loop around Run would log and try again.
func NewConsumer(db *sql.DB, form Form, h Handler, cfg *Config) *Consumer {
	mustBuild("NewConsumer", form, h)
	c := &Consumer{db: db, form: form, h: h}
	c.configure(cfg)
	return c
}

// NewBatchConsumer returns a consumer of the rows form claims from db in batches of at most
// size rows (at least 1), each batch handled by one call of h and settled together. Each worker
// claims, handles and settles its own batch; Config.Workers batches are in work at once. It
// panics when form or h is nil, as NewConsumer does.
func NewBatchConsumer(db *sql.DB, form BatchForm, size int, h BatchHandler, cfg *Config) *Consumer {
	mustBuild("NewBatchConsumer", form, h)
	c := &Consumer{db: db, form: form, batches: form, bh: h, batchSize: max(size, 1)}
	c.configure(cfg)
	return c
}

// mustBuild panics, naming the constructor, when form or handler is nil (see NewConsumer).
func mustBuild(constructor string, form, handler any) {
	switch {
	case isNil(form):
		panic("inbox: " + constructor + ": the form is nil: build one with rowlock.New, lease.New or advisory.New")
	case isNil(handler):
		panic("inbox: " + constructor + ": the handler is nil: give the consumer a handler (inbox.HandlerFunc, inbox.JSON, inbox.Func, or a type with a Handle method)")
	}
}

// isNil reports a nil interface, or one holding a nil func or pointer: a func whose call can
// only panic, or a form that is not there.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Func, reflect.Pointer:
		return rv.IsNil()
	}
	return false
}

// Run opens the form, then claims and handles rows until ctx is done; then it stops claiming,
// lets the handlers in work finish within Config.ShutdownTimeout, waits for the settlements
// still running behind them (Config.Workers), and returns nil.
//
// Where the form offers it (Plan.FindUnclaimable), Run also searches the queue for rows that no claim
// takes (see the package documentation on claimable rows) at its start and then every ten
// minutes, and logs them, once for as long as they stay as they are.
//
// Before the first claim Run checks the form against the database: a missing table or column,
// or a description or advisory key template the form cannot use (ErrSchema), a server too old
// (ErrServerTooOld), a pair the database cannot run (ErrDialect) or another consumer of the same
// queue in this process (ErrAlreadyConsuming) fails Run at once. So does a prepared statement
// the server lost or already held (Postgres 26000, 42P05): a pooler in transaction mode
// (PgBouncer before 1.21) does that on every try, so Run returns it wrapping ErrDialect, as a
// way of speaking to the database that cannot run the form, naming the pooler,
// Config.UnpreparedStatements and pgx's default_query_exec_mode=exec. A database that cannot be
// reached, or a connection cut while Run starts or later, is logged and tried again within each
// PollInterval, never taken for the schema's fault; Run keeps going and picks up again when it
// returns.
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
	c.life = plan.Described.lifecycle()
	if err := c.checkRetry(plan.Table); err != nil {
		closeForm()
		return err
	}

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
	if c.batches != nil || plan.HoldsConnection {
		// A batch settles whole, and a delivery that holds a connection holds it until it
		// settles: neither claims its next rows with its settlement.
		r.plan.SettleAndClaim = nil
	}
	var settlers sync.WaitGroup
	if n := c.settlersBehind(*plan, workers); n > 0 {
		r.behind = make(chan settlement)
		settlers.Add(n)
		for range n {
			go r.settleBehind(ctx, settlers.Done)
		}
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
	if plan.FindUnclaimable != nil {
		go watchUnclaimable(ctx, plan.FindUnclaimable, log, unclaimableDone)
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
		if r.behind != nil {
			close(r.behind)
			settlers.Wait()
		}
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

// open opens the form, retrying while the database cannot be reached, and claims the queue in
// this process. It returns a nil plan when ctx ends first. closeForm closes the form and lets
// another consumer open it; unqueue lets another consumer claim the queue.
//
// An Open that fails is tried again after a poll interval, unless trying again cannot mend its
// error (fatal): among those, a prepared statement the server lost or already held, which a
// pooler in transaction mode causes on every try (dialect.Pooled names the settings). Once
// the form is open, a clock that follows the database's syncs; it is tried again only where
// its connection failed.
func (c *Consumer) open(ctx context.Context) (plan *Plan, closeForm, unqueue func(), err error) {
	if err := claimForm(c.form); err != nil {
		return nil, nil, nil, err
	}
	q := Queue{Name: c.cfg.Queue, Transactional: c.cfg.Transactional, UnflushedAcks: c.cfg.UnflushedAcks, UnpreparedStatements: c.cfg.UnpreparedStatements, Logger: c.log, Clock: c.cfg.Clock, MaxAttempts: max(c.cfg.MaxAttempts, 0), Backoff: c.backoff}
	for {
		plan, err := c.form.Open(ctx, c.db, q)
		if err == nil {
			unqueue, err := c.start(ctx, plan)
			if err == nil {
				return &plan, func() {
					if err := c.form.Close(); err != nil {
						c.log.Error("inbox: closing the form", "queue", c.cfg.Queue, "table", plan.Table, "err", err)
					}
					releaseForm(c.form)
				}, unqueue, nil
			}
			c.form.Close()
			if !dialect.ConnectionFailed(err) {
				releaseForm(c.form)
				return nil, nil, nil, err
			}
		} else if err = dialect.Pooled(err, c.cfg.UnpreparedStatements); fatal(err) {
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

// start claims plan's queue in this process and, where the clock follows the database's, syncs
// it; when the sync fails it lets the queue go again.
func (c *Consumer) start(ctx context.Context, plan Plan) (unqueue func(), err error) {
	if unqueue, err = claimQueue(c.db, plan.Table, c.cfg.Queue); err != nil {
		return nil, err
	}
	if s, ok := c.cfg.Clock.(interface{ Sync(context.Context) error }); ok {
		if err := s.Sync(ctx); err != nil {
			unqueue()
			return nil, fmt.Errorf("inbox: queue %q of table %q: %w", c.cfg.Queue, plan.Table, dialect.Pooled(err, c.cfg.UnpreparedStatements))
		}
	}
	return unqueue, nil
}

// fatal reports an error that trying again cannot mend: the description, the dialect (a
// pooler's lost prepared statements among them), the server version, or another consumer of
// the queue.
func fatal(err error) bool {
	for _, e := range []error{ErrSchema, ErrDialect, ErrServerTooOld, ErrAlreadyConsuming} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// settlersBehind is how many settlements may run behind the workers of plan: none where a
// delivery's settlement ends a hold that is its worker's (a transaction or a connection in
// work, a batch's hold), or where the form claims the worker's next row with it
// (Plan.SettleAndClaim); otherwise behindPerWorker for each worker.
func (c *Consumer) settlersBehind(plan Plan, workers int) int {
	if plan.HoldsConnection || c.batches != nil || c.cfg.Transactional || plan.SettleAndClaim != nil {
		return 0
	}
	return behindPerWorker * workers
}

// behindPerWorker bounds the settlements that run behind each worker: enough that while one
// commit is in flight the next rows' settlements queue up and share the one after, few enough
// that a slow database soon makes the workers wait for it rather than claim more.
const behindPerWorker = 4
