package inbox

import (
	"log/slog"
	"math/rand/v2"
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
	// when it runs fewer than asked. Where a delivery holds nothing of its worker's, a worker may
	// take its next row while its last one's settlement commits: the package documentation says
	// where each settlement runs ("Where settlements run").
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
	// HandlerTimeout bounds each handler call: the handler's context carries a deadline that
	// far from its start, and is cancelled then, its Err context.DeadlineExceeded. A handler
	// that has not returned a second later is abandoned, as at shutdown: its unit settles as a
	// retry by the retry policy (it dies at the attempt limit), its last error naming the
	// timeout, and a new worker takes its place while it runs on. A kind's KindOptions.Timeout
	// replaces it for its jobs. Default DefaultHandlerTimeout (10 minutes); below zero: no bound.
	HandlerTimeout time.Duration
	// Transactional lends each delivery a transaction (Delivery.Tx) opened at the dialect's
	// level: Ack commits the handler's writes with the settlement, every other outcome rolls
	// them back.
	Transactional bool
	// UnflushedAcks has an Ack outside transactional mode commit without waiting for the disk
	// (Postgres: synchronous_commit off for that statement's transaction alone); a Drop, which
	// settles as an Ack does, too. A server crash may then forget the last acks, whose rows are
	// delivered again (the lease form's once their lease runs out, the others' at once): a
	// second delivery, which at-least-once delivery allows, for a commit's flush saved per
	// message. Every other outcome, and every settlement in transactional mode (which commits
	// the handler's writes), still waits. Default false: every settlement waits.
	//
	// Every form honours it on Postgres: the lease and advisory forms for each ack statement
	// (a row's, a batch's, merged acks), the row lock form for a transaction whose only change
	// is the ack (a delivery's, or a batch's whose rows are all acked), since its claim and its
	// settlement commit together and the setting holds for the whole transaction. MySQL,
	// MariaDB and SQLite set durability for the server or the connection, and wait whatever it
	// says.
	UnflushedAcks bool
	// UnpreparedStatements has the form run every statement by its text, never preparing it,
	// and check each at Open without preparing it either (EXPLAIN with every parameter NULL,
	// which plans a statement without running it): for PgBouncer in transaction pooling before
	// 1.21 (no max_prepared_statements), which does not carry a statement prepared on one
	// server connection to the others. The driver must not prepare them either: with pgx set
	// default_query_exec_mode=exec (or simple_protocol) in the DSN, since its default prepares
	// and caches every statement with arguments; go-sql-driver/mysql prepares each statement
	// with arguments (and closes it after) unless the DSN says interpolateParams=true. The row
	// lock and lease forms honour it; the advisory form refuses it at Open (ErrDialect): its
	// session locks do not hold behind transaction pooling. Default false: the forms prepare
	// their statements at Open.
	UnpreparedStatements bool
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
	// the table has no DeadAt column), and no claim takes a row whose attempt column has
	// reached it (a row whose death failed too: ErrDeathFailed). Zero: DefaultMaxAttempts (25);
	// negative: no limit. Where the table has no Attempt column attempts are not counted, and
	// there is no limit.
	MaxAttempts int
	// Retention deletes the table's processed and dead rows once they are older than an age, in
	// bounded batches, one consumer at a time under a lease of its own (see Retention). Nil:
	// settled rows are kept. Setting it needs the table inbox_sweeps (inbox schema -retention).
	Retention *Retention
	// CancelPoll is how often a consumer of a table with a CancelledAt column reads which of
	// the rows it holds were cancelled (Cancel), cancels their handlers' contexts with the cause
	// ErrCancelled, and applies the table's other requests. Default DefaultCancelPoll (1 s).
	// Such a table needs the table inbox_cancels (inbox schema -cancels).
	CancelPoll time.Duration
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
	if c.cfg.HandlerTimeout == 0 {
		c.cfg.HandlerTimeout = DefaultHandlerTimeout
	}
	if c.cfg.Retry == nil {
		c.cfg.Retry = ExponentialBackoff{}
	}
	if c.cfg.CancelPoll <= 0 {
		c.cfg.CancelPoll = DefaultCancelPoll
	}
	if c.cfg.MaxAttempts == 0 {
		c.cfg.MaxAttempts = DefaultMaxAttempts
	}
	c.log = c.cfg.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
}

// pollWait is how long an idle worker waits before it claims again, as Config.PollInterval says.
func (c *Consumer) pollWait() time.Duration {
	half := c.cfg.PollInterval / 2
	return half + rand.N(c.cfg.PollInterval-half)
}
