package inbox

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// run is one Run of a consumer.
type run struct {
	c    *Consumer
	plan Plan
	log  *slog.Logger

	sharesClaims  bool                                                 // a claim takes rows for the workers waiting or settling too
	claimSlots    chan struct{}                                        // a token per claim allowed in flight
	handoff       chan []*Delivery                                     // rows claimed by one worker for others, a unit of one each
	behind        chan settlement                                      // single settlements the workers hand to settleBehind; nil: each worker settles its own
	settlers      int                                                  // the goroutines that settle behind the workers (settlersBehind)
	otherKinds    func(context.Context, []string) ([]otherKind, error) // the search for kinds the consumer does not run; nil: none
	waiting       atomic.Int32                                         // workers waiting for a row, whom a claim takes rows for
	settling      atomic.Int32                                         // workers settling, who will want a row in a moment
	failing       sync.Mutex                                           // guards claimsFailing
	claimsFailing bool

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced to wake every idle worker

	handlerCtx     context.Context // handlers' context: cancelled when the shutdown timeout runs out
	cancelHandlers context.CancelFunc

	slotsMu sync.Mutex
	slots   []*slot // the workers' slots; a slot abandoned past its time is replaced (replace)

	due *dueWatch // when the next delayed row falls due; nil without a RetryAfter column

	failedMu sync.Mutex
	failed   map[failureKey]struct{} // failed settlements logged at ERROR

	runGroups
	unlisten             func()        // stops the wake-ups of this process's publishes
	stopWatch, watchDone chan struct{} // end the pool's watch, and say it ended
}

// slot is one worker's state, shared with the extender and with shutdown.
type slot struct {
	mu        sync.Mutex
	inWork    []*Delivery // the unit whose handler runs, nil otherwise
	asked     []int64     // the ids of inWork asked to be cancelled (Cancel), nil otherwise
	abandoned bool        // shutdown gave inWork's rows back; the worker must not settle them
	exited    chan struct{}

	outs    []outcome.Outcome  // the worker's outcomes of its unit in work, reused
	applied []outcome.Outcome  // the outcomes a transactional batch applies, for the observer
	one     [1]outcome.Outcome // a single handler's outcome, reused

	// The worker's handler context, a child of the run's, which the extender cancels when it
	// finds the hold of the unit in work lost, and the timeout watch at its deadline. Replaced
	// only once cancelled; written by the worker under mu. hctx, where the unit has a time
	// bound, is what the handler gets: ctx, with the unit's deadline. It is new for every unit,
	// its one allocation, since a context must not change once given out: a handler may leave
	// it with goroutines that outlive it (database/sql watches a transaction's context).
	ctx    context.Context
	cancel context.CancelCauseFunc
	hctx   *handlerContext
}

// workers returns the workers' slots as they are now.
func (r *run) workers() []*slot {
	r.slotsMu.Lock()
	defer r.slotsMu.Unlock()
	return slices.Clone(r.slots)
}

// replace puts a new worker in the place of slot s, at index i, whose handler was abandoned.
func (r *run) replace(ctx context.Context, i int, s *slot) {
	n := &slot{exited: make(chan struct{})}
	r.slotsMu.Lock()
	if r.slots[i] != s {
		r.slotsMu.Unlock()
		return
	}
	r.slots[i] = n
	r.slotsMu.Unlock()
	go r.work(ctx, n)
}

// relayWakeups turns a publish's wake-up into a broadcast to the idle workers.
func (r *run) relayWakeups(ctx context.Context, wakeups <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wakeups:
			r.wakeAll()
		}
	}
}

func (r *run) wakeAll() {
	r.notifyMu.Lock()
	close(r.notify)
	r.notify = make(chan struct{})
	r.notifyMu.Unlock()
}

func (r *run) notified() <-chan struct{} {
	r.notifyMu.Lock()
	defer r.notifyMu.Unlock()
	return r.notify
}

// work is one worker: take a unit (handed over by another worker, or claimed), handle it,
// settle it, until ctx is done.
func (r *run) work(ctx context.Context, s *slot) {
	defer close(s.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	ops := newDetached(ctx, settleTimeout)
	defer ops.stop()
	var kept []*Delivery // single rows this worker claimed and could not hand over
	defer func() {
		for i := range kept {
			r.release(kept[i : i+1 : i+1])
		}
	}()
	for ctx.Err() == nil {
		var u []*Delivery
		if len(kept) > 0 {
			// Capped at its one row, so that no append to the unit can write over the rows kept.
			u, kept = kept[:1:1], kept[1:]
		} else if u, kept = r.next(ctx, ops, timer); u == nil {
			continue
		}
		if ctx.Err() != nil {
			r.release(u)
			return
		}
		mayClaim := len(kept) == 0
		next, ok := r.deliver(ctx, ops, s, u, mayClaim)
		if !ok {
			return
		}
		if mayClaim {
			kept = next
		}
	}
}

// next returns the worker's next unit: one handed over by another worker, or the first of a
// claim. Where deliveries hold no connection, a single-row claim takes a row for this worker
// and one for each worker waiting or settling (who will want one as soon as its settlement
// commits), and hands those over; the rows no one can take are returned to keep. A batch claim
// takes one batch, for this worker. After a claim that found nothing (or failed) next idles
// (see idle) and returns nil, or the row another worker handed over meanwhile.
func (r *run) next(ctx context.Context, ops *detached, timer *time.Timer) (unit, kept []*Delivery) {
	select {
	case u := <-r.handoff:
		return u, nil
	default:
	}
	r.waiting.Add(1)
	select {
	case u := <-r.handoff:
		r.waiting.Add(-1)
		return u, nil
	case <-ctx.Done():
		r.waiting.Add(-1)
		return nil, nil
	case r.claimSlots <- struct{}{}:
		r.waiting.Add(-1)
	}
	// A row handed over while this worker took the slot goes first: it is claimed already, and
	// waiting it is not extended.
	select {
	case u := <-r.handoff:
		<-r.claimSlots
		return u, nil
	default:
	}
	// Taken before the claim: a publish that lands after the claim looked wakes this worker.
	woken := r.notified()
	ds, err := r.claim(ops)
	if err != nil {
		woken = nil
	}
	if err != nil || len(ds) == 0 {
		return r.idle(ctx, ops, timer, woken), nil
	}
	mine, rest := r.c.units.split(ds)
	for len(rest) > 0 {
		select {
		case r.handoff <- rest[:1:1]:
			rest = rest[1:]
			continue
		default:
		}
		break
	}
	return mine, rest
}

// idle waits a poll wait, or until ctx is done, woken is closed (a publish since the claim,
// where it is not nil) or another worker hands a row over, which it returns. After a claim
// that found nothing (woken not nil) it waits no longer than until the queue's next delayed row
// falls due.
func (r *run) idle(ctx context.Context, ops *detached, timer *time.Timer, woken <-chan struct{}) []*Delivery {
	wait := r.c.pollWait()
	if woken != nil {
		if r.due != nil {
			until, ok := r.due.until(ops.begin())
			ops.end()
			if ok && until < wait {
				wait = max(until, 0)
			}
		}
	}
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	timer.Reset(wait)
	defer timer.Stop() // since Go 1.23 a stopped timer delivers no stale tick
	select {
	case u := <-r.handoff:
		return u
	case <-ctx.Done():
	case <-woken:
	case <-timer.C:
	}
	return nil
}

// claim claims the worker's batch, or single rows: its own, and where deliveries hold no
// connection one for each worker waiting or settling. It holds the claim slot the caller took
// meanwhile. The claim runs on a detached context, to its end even when Run's context is
// done, so that no row is left half claimed.
func (r *run) claim(ops *detached) ([]*Delivery, error) {
	cctx := ops.begin()
	began := r.now()
	others := 0
	if r.sharesClaims {
		others = int(r.waiting.Load() + r.settling.Load())
	}
	ds, err := r.c.units.claim(cctx, others)
	r.observeClaim(cctx, ds, began, err)
	ops.end()
	<-r.claimSlots
	r.noteClaim(err)
	return ds, err
}

// noteClaim logs the first of a run of failed claims, and the claim that ends the run.
func (r *run) noteClaim(err error) {
	r.failing.Lock()
	defer r.failing.Unlock()
	switch {
	case err != nil && !r.claimsFailing:
		r.claimsFailing = true
		r.log.Error("inbox: claim failed; trying again within each poll interval", "err", err, "poll_interval", r.c.cfg.PollInterval)
	case err == nil && r.claimsFailing:
		r.claimsFailing = false
		r.log.Info("inbox: claims succeed again")
	}
}
