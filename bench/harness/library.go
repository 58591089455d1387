package harness

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// This file is everything the harness asks of the library's API: a form built by its name, a
// consumer of single deliveries or batches that acks every row, the form's claims and
// settlements counted on their way, and a publish.

// Forms are the library's forms, in the order the tables show them.
var Forms = []string{"rowlock", "lease", "advisory"}

// Consumer describes a library consumer over a bench table: every row it hands to a handler
// is acked.
type Consumer struct {
	Form    string // rowlock, lease or advisory
	Table   string // the bench table's name (see Table)
	Workers int
	// Batch is the rows a handler call takes: 1 for single deliveries (inbox.NewConsumer),
	// above 1 for batches of up to that many (inbox.NewBatchConsumer).
	Batch int
	// Poll is the consumer's PollInterval; zero: the library's default.
	Poll time.Duration
	// Handle, when not nil, is called with each row's payload before its Ack.
	Handle func(payload []byte)
	// History says the table keeps its processed rows: it has HistoryColumn, which Ack stamps
	// instead of deleting the row.
	History bool
	// Queue, when not empty, is the queue the consumer claims: the table has QueueColumn, its
	// queue column.
	Queue string
	// UnflushedAcks is the consumer's Config.UnflushedAcks.
	UnflushedAcks bool
	// Kinds, above zero, has the consumer run jobs by kind: its handler an *inbox.Kinds with
	// that many kinds registered (at most MaxKinds), over a table made by CreateKindTable
	// whose rows SetKinds spread over them; its claims then name the kinds. Zero: the
	// consumer takes every row, whatever its kind column holds.
	Kinds int
	// KindsUnfiltered, with Kinds, has the consumer run the same *inbox.Kinds behind a plain
	// handler (inbox.HandlerFunc of its Handle method): its rows are read with their kind,
	// dispatched by it and their arguments decoded as a consumer of kinds does, but the
	// consumer does not know it runs kinds, so its claims name none and take every row. It
	// differs from a consumer of Kinds in the claim's kind filter alone (bench/cmd/kinds).
	KindsUnfiltered bool
	// Groups has the consumer claim by FIFO group, over a table made by
	// CreateGroupTable whose rows SetGroups spread over groups. False: the consumer ignores the
	// group column.
	Groups bool
	// RoundRobin, with Groups, has the lease form spread its claims across the groups
	// (lease.Config.GroupsRoundRobin).
	RoundRobin bool
	// Limits has the consumer's table name the limits' tables (inbox.Table.Limits), made by
	// CreateLimitTables: its claims skip rows of full limits and take a slot of each limit a
	// row is under. False: no limits, and claims do not read them.
	Limits bool

	counts *drainCounts // set by DrainLibrary
}

// Runner is a consumer built and ready to run until its context is done.
type Runner interface {
	Run(ctx context.Context) error
}

// Build builds a fresh form (a form serves one consumer at a time) and the consumer on t.
func (c Consumer) Build(t *Target) (Runner, error) {
	tbl := c.table()
	var f inbox.Form
	switch c.Form {
	case "rowlock":
		f = rowlock.New(t.D, tbl)
	case "lease":
		f = lease.New(t.D, tbl, &lease.Config{GroupsRoundRobin: c.RoundRobin})
	case "advisory":
		f = advisory.New(t.D, tbl, nil)
	default:
		return nil, fmt.Errorf("unknown form %q", c.Form)
	}
	handle := c.Handle
	if handle == nil {
		handle = func([]byte) {}
	}
	// Every row acks: the retry policy never runs, and the bench table has no retry_after.
	cfg := &inbox.Config{Workers: c.Workers, PollInterval: c.Poll, Queue: c.Queue, UnflushedAcks: c.UnflushedAcks, Logger: logger, Retry: inbox.RetryAtOnce}
	if c.Batch <= 1 {
		if c.counts != nil {
			f = &countedForm{f, c.counts}
		}
		if c.Kinds > 0 {
			k := &inbox.Kinds{}
			registerKinds(k, min(c.Kinds, MaxKinds), handle)
			if c.KindsUnfiltered {
				return inbox.NewConsumer(t.DB, f, inbox.HandlerFunc(k.Handle), cfg), nil
			}
			return inbox.NewConsumer(t.DB, f, k, cfg), nil
		}
		return inbox.NewConsumer(t.DB, f, inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			handle(d.Payload)
			return outcome.Ack()
		}), cfg), nil
	}
	bf, ok := f.(inbox.BatchForm)
	if !ok {
		return nil, fmt.Errorf("the %s form does not implement inbox.BatchForm", c.Form)
	}
	if c.counts != nil {
		bf = &countedBatchForm{bf, c.counts}
	}
	return inbox.NewBatchConsumer(t.DB, bf, c.Batch, inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
		acks := make([]outcome.Outcome, len(ds))
		for i, d := range ds {
			handle(d.Payload)
			acks[i] = outcome.Ack()
		}
		return acks
	}), cfg), nil
}

// Enqueue publishes a row for each payload into the bench table called table, through the
// library (which wakes this process's consumers of the table at once).
func Enqueue(ctx context.Context, t *Target, table string, payloads ...[]byte) error {
	msgs := make([]inbox.Message, len(payloads))
	for i, p := range payloads {
		msgs[i].Payload = p
	}
	return inbox.Enqueue(ctx, t.DB, t.D, Table(table), msgs...)
}

// logger shows the library's warnings and errors: a bench run that logs them is not a clean
// measurement.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// countedForm counts the claims and settlements of a consumer of single deliveries.
type countedForm struct {
	inbox.Form
	counts *drainCounts
}

func (f *countedForm) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	return f.counts.claim(ctx, max, f.Form.Claim)
}

// Open counts the claims and settlements of the form's settle-and-claim too, where it offers one.
func (f *countedForm) Open(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	plan, err := f.Form.Open(ctx, db, q)
	if sc := plan.SettleAndClaim; sc != nil {
		plan.SettleAndClaim = func(ctx context.Context, d *inbox.Delivery, o outcome.Outcome, max int) ([]*inbox.Delivery, error, error) {
			ds, settleErr, claimErr := sc(ctx, d, o, max)
			f.counts.claimed(len(ds), claimErr)
			return ds, f.counts.settledRows(1, settleErr), claimErr
		}
	}
	return plan, err
}

func (f *countedForm) Settle(ctx context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	return f.counts.settledRows(1, f.Form.Settle(ctx, d, o))
}

// countedBatchForm counts the claims and settlements of a batch consumer.
type countedBatchForm struct {
	inbox.BatchForm
	counts *drainCounts
}

func (f *countedBatchForm) ClaimBatch(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	return f.counts.claim(ctx, max, f.BatchForm.ClaimBatch)
}

// claim runs claim, a form's Claim or ClaimBatch, and counts it.
func (c *drainCounts) claim(ctx context.Context, max int, claim func(context.Context, int) ([]*inbox.Delivery, error)) ([]*inbox.Delivery, error) {
	c.claiming()
	ds, err := claim(ctx, max)
	c.claimed(len(ds), err)
	return ds, err
}

func (f *countedBatchForm) SettleBatch(ctx context.Context, ds []*inbox.Delivery, os []outcome.Outcome) error {
	return f.counts.settledRows(len(ds), f.BatchForm.SettleBatch(ctx, ds, os))
}
