package inbox

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Consumer claims rows of one queue through a form and runs a handler for each row, or for each
// batch of rows. Create it with NewConsumer or NewBatchConsumer; Run does the work.
type Consumer struct {
	db    *sql.DB
	form  Form   // opened and closed by Run; its units claim through it
	units units  // single rows or batches, as the constructor chose
	kinds *Kinds // the handler, where it runs jobs by kind; nil otherwise
	cfg   Config
	log   *slog.Logger

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
	c := &Consumer{db: db, form: form, units: singles{form, h}}
	c.kinds, _ = h.(*Kinds)
	c.configure(cfg)
	return c
}

// NewBatchConsumer returns a consumer of the rows form claims from db in batches of at most
// size rows (at least 1), each batch handled by one call of h and settled together. Each worker
// claims, handles and settles its own batch; Config.Workers batches are in work at once. It
// panics when form or h is nil, as NewConsumer does.
func NewBatchConsumer(db *sql.DB, form BatchForm, size int, h BatchHandler, cfg *Config) *Consumer {
	mustBuild("NewBatchConsumer", form, h)
	c := &Consumer{db: db, form: form, units: batches{form, h, max(size, 1)}}
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
// queue in this process (ErrAlreadyConsuming; consumers of Kinds share a queue where no kind is
// registered with two of them) fails Run at once. So does a prepared statement
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
	r, err := c.newRun(*plan)
	if err != nil {
		closeForm()
		return err
	}
	r.start(ctx)
	<-ctx.Done()
	r.stop(closeForm)
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
	q := c.binding()
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

// binding is what the consumer opens its form with.
func (c *Consumer) binding() Binding {
	b := Binding{Name: c.cfg.Queue, Transactional: c.cfg.Transactional, UnflushedAcks: c.cfg.UnflushedAcks, UnpreparedStatements: c.cfg.UnpreparedStatements, Logger: c.log, Clock: c.cfg.Clock, MaxAttempts: max(c.cfg.MaxAttempts, 0), Backoff: c.backoff}
	if c.kinds != nil {
		b.Kinds = c.kinds.claimed(b.MaxAttempts)
	}
	return b
}

// start claims plan's queue in this process, checks its retention (checkRetention) and, where
// the clock follows the database's, syncs it; when either fails it lets the queue go again.
func (c *Consumer) start(ctx context.Context, plan Plan) (unqueue func(), err error) {
	var kinds []string
	if c.kinds != nil {
		kinds = c.kinds.Names()
	}
	if unqueue, err = claimQueue(c.db, plan.Table, c.cfg.Queue, kinds); err != nil {
		return nil, err
	}
	if err := c.checkRetention(ctx, plan); err != nil {
		unqueue()
		return nil, err
	}
	if s, ok := c.cfg.Clock.(interface{ Sync(context.Context) error }); ok {
		if err := s.Sync(ctx); err != nil {
			unqueue()
			return nil, sentinel.Errorf(nil, sentinel.Queue(plan.Table, c.cfg.Queue), "%w", dialect.Pooled(err, c.cfg.UnpreparedStatements))
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
