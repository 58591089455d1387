package inbox

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// deliver runs the handler on unit u and settles its outcomes on a detached context. When the
// worker would claim next (mayClaim) and the form can, the settlement claims the worker's next
// row with it, which deliver returns. It reports false when shutdown abandoned the unit, and the
// worker must stop.
func (r *run) deliver(ctx context.Context, ops *detached, s *slot, u []*Delivery, mayClaim bool) ([]*Delivery, bool) {
	s.mu.Lock()
	if s.ctx == nil || s.ctx.Err() != nil {
		s.ctx, s.cancel = context.WithCancelCause(r.handlerCtx)
	}
	var handlerCtx context.Context = s.ctx
	s.hctx = nil
	if t := r.c.timeoutOf(u); t > 0 {
		s.hctx = &handlerContext{Context: s.ctx, deadline: time.Now().Add(t)}
		handlerCtx = s.hctx
	}
	s.inWork = u
	s.mu.Unlock()

	hctx, began := r.observeHandling(handlerCtx, u)
	outs := r.handle(hctx, s, u)

	s.mu.Lock()
	if s.abandoned {
		s.mu.Unlock()
		now := r.now()
		r.observeSettled(hctx, u, outs, now.Sub(began), now, errAbandoned)
		return nil, false
	}
	s.inWork = nil
	asked := s.asked
	s.asked = nil
	s.mu.Unlock()
	if asked != nil {
		cancelledOutcomes(u, outs, asked, r.c.cfg.Transactional)
	}

	handled := r.now()
	where := r.placeOf(ctx, outs, mayClaim)
	if where == behindWorker {
		r.behind <- settlement{ctx: hctx, d: u[0], o: outs[0], handler: handled.Sub(began)}
		return nil, true
	}
	sctx := ops.begin()
	var err error
	var next []*Delivery
	if where == withNextClaim {
		var claimErr error
		next, err, claimErr = r.plan.SettleAndClaim(sctx, u[0], outs[0], 1)
		r.observeClaim(sctx, next, handled, claimErr)
		<-r.claimSlots
		r.noteClaim(claimErr)
	} else {
		r.settling.Add(1)
		err = r.c.units.settle(sctx, u, outs)
		r.settling.Add(-1)
	}
	shown := outs
	if r.c.cfg.Transactional {
		shown = r.appliedInTx(s, outs)
	}
	r.observeSettled(hctx, u, shown, handled.Sub(began), handled, err)
	ops.end()
	r.settledAs(u, outs, err)
	return next, true
}

// settlement is a single delivery's outcome, settled behind its worker (run.behind).
type settlement struct {
	ctx     context.Context // the handler's, for the observer
	d       *Delivery
	o       outcome.Outcome
	handler time.Duration // how long the handler ran
}

// settleBehind settles what the workers hand over, until behind is closed, on a detached
// context of its own.
func (r *run) settleBehind(ctx context.Context, done func()) {
	defer done()
	ops := newDetached(ctx, settleTimeout)
	defer ops.stop()
	var u [1]*Delivery
	var outs [1]outcome.Outcome
	for job := range r.behind {
		u[0], outs[0] = job.d, job.o
		settling := r.now()
		err := r.c.form.Settle(ops.begin(), job.d, job.o)
		r.observeSettled(job.ctx, u[:], outs[:], job.handler, settling, err)
		ops.end()
		r.settledAs(u[:], outs[:], err)
	}
}

// settledAs logs what a settlement of u by outs that ended in err leaves to say, and where the
// table has concurrency limits or FIFO groups wakes its consumers in this process.
func (r *run) settledAs(u []*Delivery, outs []outcome.Outcome, err error) {
	if err == nil && (r.plan.Described.Limits != "" || r.plan.Described.GroupKey != "") {
		// A settlement frees its rows' concurrency slots (docs/limits.md) and its row's group
		// (docs/groups.md): a claim that found a limit full, or every head's group held, and
		// left its workers idle until the next poll, may take a row now.
		wake(r.plan.Table)
	}
	switch {
	case errors.Is(err, ErrDeathFailed):
		if r.firstTime(u, err) {
			r.log.Error("inbox: row can neither settle nor die: it stays in the table with its attempt at the limit, and no claim takes it again (said once)", "ids", ids(u), "err", err)
		}
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
	case dialect.ConnectionFailed(err):
		r.log.Warn("inbox: settlement failed: its connection was lost; the rows return to the queue by their form's rule, as after a crash, and the settlement does not count an attempt against them", "ids", ids(u), "err", err)
	case err != nil:
		r.settleFailed(u, err)
	}
	if err == nil {
		for i, o := range outs {
			r.settled(u[i], o)
		}
	}
}

// settled logs what ends a row's life in the queue other than an Ack: a Drop with its reason,
// a row dead, or dropped for want of a dead_at column to die in.
func (r *run) settled(d *Delivery, o outcome.Outcome) {
	switch o.Kind() {
	case outcome.KindDrop:
		if death, ok := o.Err().(dying); ok {
			r.log.Error("inbox: row died and was dropped, since the table has no DeadAt column: name one (a nullable timestamp) in inbox.Table.DeadAt to keep dead rows", "id", d.ID, "attempt", d.Attempt, "last_error", death.error)
			return
		}
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
// refused): the form backed its rows off by the retry policy, or where that was their last
// attempt had them die. The same error for the same rows is logged once at ERROR, and again
// at DEBUG, so that a settlement that can never commit says why once and does not fill the
// log.
func (r *run) settleFailed(u []*Delivery, err error) {
	msg := "inbox: settlement failed; each row backs off by the retry policy, its attempt counted and the error kept as its last, or dies where that was its last attempt"
	if !r.firstTime(u, err) {
		r.log.Debug(msg, "ids", ids(u), "err", err)
		return
	}
	r.log.Error(msg+" (said once per row and error)", "ids", ids(u), "err", err)
}

// firstTime reports whether the run meets the failed settlement of u with err for the first
// time, and remembers it.
func (r *run) firstTime(u []*Delivery, err error) bool {
	key := failureKey{u[0].ID, err.Error()}
	r.failedMu.Lock()
	defer r.failedMu.Unlock()
	if _, seen := r.failed[key]; seen {
		return false
	}
	if len(r.failed) >= failuresKept {
		clear(r.failed)
	}
	r.failed[key] = struct{}{}
	return true
}

// failureKey names a failed settlement: its first row and its error's text.
type failureKey struct {
	id  int64
	err string
}

// failuresKept bounds the failed settlements a run remembers having logged.
const failuresKept = 1024

// dying is the reason of a row that dies where the table has no dead_at column: resolve turns
// its Fail into a Drop that carries it, so that the row's end is logged as a death once the
// drop has settled.
type dying struct{ error }

func (d dying) Unwrap() error { return d.error }

// errNoOutcome is the reason of a row whose handler gave no outcome.
var errNoOutcome = errors.New("the handler gave the row no outcome")

// resolve applies the retry policy and the attempt limit to o, the outcome of d, and returns
// what the form is to apply: a retry becomes a RetryAfter by the policy (a Retry at once where
// the table has no retry_after column, which an explicit RetryAfter then is too, logged once
// per consumer); a retry at the attempt limit becomes a Fail with "attempt n of m: <reason>";
// a Fail on a table without dead_at becomes a Drop whose reason is dying, logged at ERROR once
// it has settled. Ack and Drop pass as they are, and cost nothing.
func (c *Consumer) resolve(d *Delivery, o outcome.Outcome) outcome.Outcome {
	o = c.limit(d, o)
	if o.Kind() == outcome.KindFail && !c.life.DeadAt {
		why := o.Err()
		if why == nil {
			why = errors.New("failed by the handler")
		}
		return outcome.Drop().WithError(dying{why})
	}
	return o
}

// limit is resolve but for a Fail, which it leaves a Fail whether or not the table has a
// dead_at column.
func (c *Consumer) limit(d *Delivery, o outcome.Outcome) outcome.Outcome {
	switch o.Kind() {
	case outcome.KindAck, outcome.KindDrop, outcome.KindCancel:
		return o
	case outcome.KindNone:
		o = outcome.Retry().WithError(errNoOutcome)
	}
	maxAttempts, retry := c.policyOf(d.Kind)
	if o.Kind() != outcome.KindFail && c.life.Attempt && maxAttempts > 0 && d.Attempt >= maxAttempts {
		why := o.Err()
		if why == nil {
			why = errors.New("retried by the handler")
		}
		o = outcome.Fail(fmt.Errorf("attempt %d of %d: %w", d.Attempt, maxAttempts, why))
	}
	switch o.Kind() {
	case outcome.KindRetry:
		if c.life.RetryAfter {
			return outcome.RetryAfter(retry.Delay(d.Attempt)).WithError(o.Err())
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

// policyOf is the attempt limit (zero: none) and the retry policy of a row of kind: its kind's
// (KindOptions), where the consumer runs jobs by kind, or the consumer's.
func (c *Consumer) policyOf(kind string) (maxAttempts int, retry RetryPolicy) {
	maxAttempts, retry = max(c.cfg.MaxAttempts, 0), c.cfg.Retry
	if c.kinds == nil {
		return maxAttempts, retry
	}
	if o, ok := c.kinds.options(kind); ok {
		maxAttempts = limitOf(o.MaxAttempts, maxAttempts)
		if o.Retry != nil {
			retry = o.Retry
		}
	}
	return maxAttempts, retry
}

// backoff is what a form applies to d when its settlement failed with err (Binding.Backoff): a
// retry by the policy, or at the attempt limit a Fail, the row's death (which the form applies
// as a drop where the table has no dead_at column), with the settlement's error as the row's
// last.
func (c *Consumer) backoff(d *Delivery, err error) outcome.Outcome {
	return c.limit(d, outcome.Retry().WithError(fmt.Errorf("settlement failed: %w", err)))
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
	return r.c.units.call(ctx, ds, &s.one)
}
