package inbox

import (
	"context"
	"log/slog"
	"slices"

	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/outcome"
)

// Applied returns the outcomes a consumer of table t configured by cfg (nil: the defaults),
// whose handler is kinds where it runs jobs by kind (nil otherwise), settles a unit's rows by (ds: one delivery, or a batch) when its handler returned returned
// (returned[i] is ds[i]'s; the zero outcome, or none past the end of a short slice, where it gave
// none) or, where p is not nil, panicked with p. It runs the code by which a consumer turns what
// its handler did into what it applies, without a form or a database: a panic or a zero outcome
// is a Retry; a row whose payload did not decode (Delivery.DecodeError) takes
// Config.UndecodablePayload; the retry policy, the attempt limit and the table's columns of the
// failure lifecycle then apply (Config.Retry, Config.MaxAttempts, Table.Attempt, RetryAfter and
// DeadAt), each row's kind's own (KindOptions.MaxAttempts and Retry) where kinds registers
// it; in transactional mode a batch whose outcomes are not all Ack has its Acks retried. A
// consumer's Observer sees the same in Settlement.Outcomes. It fails, wrapping ErrSchema, where
// Run would refuse the pair: a retry policy that delays, the consumer's or a kind's, and no
// RetryAfter column; kinds, and no Kind column.
//
// It is the seam of package inboxtest, which reports what it returns; an application has no
// other use for it.
func Applied(t Table, cfg *Config, kinds *Kinds, ds []*Delivery, returned []outcome.Outcome, p any) ([]outcome.Outcome, error) {
	c := &Consumer{kinds: kinds}
	c.configure(cfg)
	c.log = slog.New(slog.DiscardHandler) // a rehearsal, not a consumer's event
	c.life = t.lifecycle()
	if err := c.checkRetry(t.Name); err != nil {
		return nil, err
	}
	if err := c.checkKinds(Plan{Table: t.Name, Described: t}); err != nil {
		return nil, err
	}
	// The handler's part is replayed, so that the consumer's code recovers the panic, and
	// passes over the rows that did not decode, as it does a handler's.
	byRow := make(map[*Delivery]outcome.Outcome, len(ds))
	for i, d := range ds[:min(len(ds), len(returned))] {
		byRow[d] = returned[i]
	}
	c.units = batches{h: BatchHandlerFunc(func(_ context.Context, pass []*Delivery) []outcome.Outcome {
		if p != nil {
			panic(p)
		}
		outs := make([]outcome.Outcome, len(pass))
		for i, d := range pass {
			outs[i] = byRow[d]
		}
		return outs
	})}
	r := &run{c: c, log: c.log}
	s := &slot{}
	outs := r.handle(context.Background(), s, ds)
	if c.cfg.Transactional {
		// What a transactional batch applies; one delivery, a batch of one, has no Ack to turn.
		outs = r.appliedInTx(s, outs)
	}
	return slices.Clone(outs), nil
}

// checkRetry refuses a retry policy that delays, the consumer's or a kind's, on a table (named
// table) without a RetryAfter column to hold a row until then (c.life).
func (c *Consumer) checkRetry(table string) error {
	if c.life.RetryAfter {
		return nil
	}
	if c.cfg.Retry != RetryAtOnce {
		return sentinel.Errorf(ErrSchema, sentinel.Queue(table, c.cfg.Queue), "delayed retries need a RetryAfter column: add one, or use inbox.RetryAtOnce")
	}
	if c.kinds == nil {
		return nil
	}
	for _, name := range c.kinds.Names() {
		if o, _ := c.kinds.options(name); o.Retry != nil && o.Retry != RetryAtOnce {
			return sentinel.Errorf(ErrSchema, sentinel.Queue(table, c.cfg.Queue), "kind %q's delayed retries need a RetryAfter column: add one, or use inbox.RetryAtOnce", name)
		}
	}
	return nil
}
