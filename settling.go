package inbox

import (
	"context"

	"github.com/sqlinbox/inbox/outcome"
)

// Where a settlement runs: the package documentation states the policy ("Where settlements
// run"); this file is the one place the consumer decides it, and the rest asks placeOf.

// place is where a settlement runs.
type place int

const (
	inWorker place = iota
	behindWorker
	withNextClaim
)

// behindPerWorker bounds the settlements that run behind each worker: enough that while one
// commit is in flight the next rows' settlements queue up and share the one after, few enough
// that a slow database soon makes the workers wait for it rather than claim more.
const behindPerWorker = 4

// ownsNothing reports whether a unit's hold is nothing of its worker's: a single row, held by
// no connection and no transaction of the worker's.
func ownsNothing(plan Plan, cfg Config, u units) bool {
	return !u.batched() && !plan.HoldsConnection && !cfg.Transactional
}

// settlersBehind is how many settlements may run behind the workers: behindPerWorker for each
// where units own nothing of their workers and the form does not claim with its settlements;
// otherwise none.
func settlersBehind(plan Plan, cfg Config, u units, workers int) int {
	if !ownsNothing(plan, cfg, u) || plan.SettleAndClaim != nil {
		return 0
	}
	return behindPerWorker * workers
}

// fusing is the plan's SettleAndClaim where units own nothing of their workers; otherwise nil.
func fusing(plan Plan, cfg Config, u units) func(ctx context.Context, d *Delivery, o outcome.Outcome, max int) ([]*Delivery, error, error) {
	if !ownsNothing(plan, cfg, u) {
		return nil
	}
	return plan.SettleAndClaim
}

// placeOf returns where the settlement of a unit whose outcomes are outs runs; mayClaim says its
// worker would claim next. Settling with the next claim takes the claim slot for it.
func (r *run) placeOf(ctx context.Context, outs []outcome.Outcome, mayClaim bool) place {
	switch {
	case r.behind != nil && final(outs[0]):
		return behindWorker
	case mayClaim && r.fuse(ctx):
		return withNextClaim
	}
	return inWorker
}

// final reports whether o takes its row out of the queue for good: an Ack or a Drop, which
// settle it, or a Fail, which leaves it dead.
func final(o outcome.Outcome) bool { return o.Settles() || o.Kind() == outcome.KindFail }

// fuse reports whether a worker that settles should claim its next row in the same call, and
// if so takes the claim slot for it: only when the form can, and no other worker waits for a
// row or settles, so that no claim or settlement would be shared by running them apart.
func (r *run) fuse(ctx context.Context) bool {
	if r.plan.SettleAndClaim == nil || ctx.Err() != nil || len(r.handoff) > 0 || r.waiting.Load() > 0 || r.settling.Load() > 0 {
		return false
	}
	select {
	case r.claimSlots <- struct{}{}:
		return true
	default:
		return false
	}
}
