package inbox

import (
	"context"

	"github.com/sqlinbox/inbox/outcome"
)

// units is how a consumer claims, handles, settles and gives back its units of work: single rows
// (NewConsumer: a Form and a Handler) or batches (NewBatchConsumer: a BatchForm and a
// BatchHandler). The constructor chooses one; the rest of the consumer runs the same for both.
type units interface {
	// claim claims the rows of this worker's next unit, and where a claim may serve several
	// workers (sharesClaims), a row for each of others more.
	claim(ctx context.Context, others int) ([]*Delivery, error)
	// split takes this worker's unit from the rows of a claim; the rest go to other workers, a
	// unit of one row each.
	split(ds []*Delivery) (mine, rest []*Delivery)
	// call runs the handler on unit u; one is the worker's buffer for a single outcome.
	call(ctx context.Context, u []*Delivery, one *[1]outcome.Outcome) []outcome.Outcome
	settle(ctx context.Context, u []*Delivery, outs []outcome.Outcome) error
	release(ctx context.Context, u []*Delivery) error
	// batched says a unit is a batch: its worker's alone from its claim to its settlement,
	// settled whole in one call.
	batched() bool
}

// singles are units of one row.
type singles struct {
	form Form
	h    Handler
}

func (s singles) claim(ctx context.Context, others int) ([]*Delivery, error) {
	return s.form.Claim(ctx, 1+others)
}

func (singles) split(ds []*Delivery) (mine, rest []*Delivery) {
	// Capped at its one row, so that no append to the unit can write over the rows handed on.
	return ds[:1:1], ds[1:]
}

func (s singles) call(ctx context.Context, u []*Delivery, one *[1]outcome.Outcome) []outcome.Outcome {
	one[0] = s.h.Handle(ctx, u[0])
	return one[:]
}

func (s singles) settle(ctx context.Context, u []*Delivery, outs []outcome.Outcome) error {
	return s.form.Settle(ctx, u[0], outs[0])
}

func (s singles) release(ctx context.Context, u []*Delivery) error {
	return s.form.Release(ctx, u[0])
}

func (singles) batched() bool { return false }

// batches are units of a batch, of at most size rows.
type batches struct {
	form BatchForm
	h    BatchHandler
	size int
}

func (b batches) claim(ctx context.Context, _ int) ([]*Delivery, error) {
	return b.form.ClaimBatch(ctx, b.size)
}

func (batches) split(ds []*Delivery) (mine, rest []*Delivery) { return ds, nil }

func (b batches) call(ctx context.Context, u []*Delivery, _ *[1]outcome.Outcome) []outcome.Outcome {
	return b.h.HandleBatch(ctx, u)
}

func (b batches) settle(ctx context.Context, u []*Delivery, outs []outcome.Outcome) error {
	return b.form.SettleBatch(ctx, u, outs)
}

func (b batches) release(ctx context.Context, u []*Delivery) error {
	return b.form.ReleaseBatch(ctx, u)
}

func (batches) batched() bool { return true }
