package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// DefaultHandlerTimeout is Config.HandlerTimeout's default.
const DefaultHandlerTimeout = 10 * time.Minute

// timeoutGrace is how long a handler whose context's deadline passed may take to return before
// the consumer abandons it and settles its unit as a retry.
const timeoutGrace = time.Second

// timeoutTick is how often the consumer looks for handlers past their time.
const timeoutTick = 100 * time.Millisecond

// errHandlerTimeout is the cause of a handler's context cancelled at its deadline.
var errHandlerTimeout = errors.New("the handler ran out of its time (Config.HandlerTimeout, KindOptions.Timeout)")

// handlerContext is a worker's handler context: its slot's cancellable context, with the deadline
// of the unit in work.
type handlerContext struct {
	context.Context
	deadline time.Time
}

func (h *handlerContext) Deadline() (time.Time, bool) { return h.deadline, !h.deadline.IsZero() }

// Err is context.DeadlineExceeded once the watchdog cancelled the context at its deadline.
func (h *handlerContext) Err() error {
	err := h.Context.Err()
	if err != nil && errors.Is(context.Cause(h.Context), errHandlerTimeout) {
		return context.DeadlineExceeded
	}
	return err
}

// timeoutOf is how long a handler may run on unit u: its kind's KindOptions.Timeout where the
// consumer runs jobs by kind, or Config.HandlerTimeout; zero for no bound.
func (c *Consumer) timeoutOf(u []*Delivery) time.Duration {
	t := c.cfg.HandlerTimeout
	if c.kinds != nil {
		if o, ok := c.kinds.options(u[0].Kind); ok && o.Timeout != 0 {
			t = o.Timeout
		}
	}
	return max(t, 0)
}

// watchTimeouts ends the handlers that outrun their time: at its deadline a handler's context
// is cancelled (its Err is context.DeadlineExceeded); a handler that has not returned
// timeoutGrace later is abandoned, as at shutdown, and its unit settles as a retry by the retry
// policy (dying at the attempt limit), its error naming the timeout, while a new worker takes
// the abandoned one's place. It looks every tick until ctx is done.
func (r *run) watchTimeouts(ctx context.Context, tick time.Duration) {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			for i, s := range r.workers() {
				if u := r.overdue(s, now); u != nil {
					r.abandonOverdue(ctx, i, s, u)
				}
			}
		}
	}
}

// overdue cancels the handler of s at its deadline, and returns its unit where the handler has
// outrun its grace too and is now abandoned.
func (r *run) overdue(s *slot, now time.Time) []*Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.inWork
	if u == nil || s.abandoned || s.hctx == nil || now.Before(s.hctx.deadline) {
		return nil
	}
	deadline := s.hctx.deadline
	if s.ctx.Err() == nil {
		s.cancel(errHandlerTimeout)
		r.log.Warn("inbox: handler outran its time; its context is cancelled", "ids", ids(u), "timeout", r.c.timeoutOf(u))
	}
	if now.Before(deadline.Add(timeoutGrace)) {
		return nil
	}
	s.abandoned = true
	return u
}

// abandonOverdue settles u, the unit of the handler of slot s, at index i, which outran its time
// and its grace, as a retry, and starts a worker in its place.
func (r *run) abandonOverdue(ctx context.Context, i int, s *slot, u []*Delivery) {
	r.log.Error("inbox: handler still running past its time; abandoned, its rows retried by the retry policy", "ids", ids(u), "timeout", r.c.timeoutOf(u), "grace", timeoutGrace)
	why := fmt.Errorf("%w: %v", errHandlerTimeout, r.c.timeoutOf(u))
	outs := make([]outcome.Outcome, len(u))
	for j, d := range u {
		outs[j] = r.c.resolve(d, outcome.Retry().WithError(why))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	err := r.c.units.settle(sctx, u, outs)
	cancel()
	r.settledAs(u, outs, err)
	r.replace(ctx, i, s)
}

// timed reports whether a kind of k has a handler timeout of its own.
func (k *Kinds) timed() bool {
	if k == nil {
		return false
	}
	for _, r := range k.byKind {
		if r.opts.Timeout > 0 {
			return true
		}
	}
	return false
}
