package inbox

import (
	"context"
	"errors"
	"time"
)

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

// shutdownGrace bounds how long Run waits, after the shutdown timeout, for the form to give the
// abandoned rows back and close.
const shutdownGrace = time.Second

// release gives a claimed unit back without an outcome.
func (r *run) release(u []*Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := r.c.units.release(ctx, u); err != nil {
		r.log.Error("inbox: giving rows back failed; they return to the queue by their form's rule", "ids", ids(u), "err", err)
	}
}

// extend renews the hold on every unit in work each ExtendEvery, until the workers are done (a
// batch's hold is renewed through its first delivery). A unit's extension and its settlement
// never overlap: both take its slot's lock. An extension that finds the hold lost
// (ErrLeaseLost) cancels the unit's handler with that error as the cause, and the unit is not
// extended again.
func (r *run) extend(ctx context.Context) {
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
		for _, s := range r.workers() {
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

// shutdown waits for the workers within the shutdown timeout, then cancels the handlers'
// context and abandons the handlers still running, giving their rows back.
func (r *run) shutdown() {
	deadline := time.NewTimer(r.c.cfg.ShutdownTimeout)
	defer deadline.Stop()
	slots := r.workers()
	for _, s := range slots {
		select {
		case <-s.exited:
			continue
		case <-deadline.C:
		}
		break
	}
	r.cancelHandlers()
	for _, s := range r.workers() {
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
