package inbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// newRun checks what the form's plan asks of the consumer and prepares a run of it: the table's
// lifecycle against the retry policy, the workers and claims the pool allows, where settlements
// run, and the watch on the queue's next delayed row.
func (c *Consumer) newRun(plan Plan) (*run, error) {
	c.life = plan.Described.lifecycle()
	if err := c.checkRetry(plan.Table); err != nil {
		return nil, err
	}
	if err := c.checkKinds(plan); err != nil {
		return nil, err
	}
	log := c.log.With("queue", c.cfg.Queue, "table", plan.Table)
	workers, claims, err := c.budget(plan, log)
	if err != nil {
		return nil, err
	}
	r := &run{
		c:            c,
		plan:         plan,
		log:          log,
		sharesClaims: !c.units.batched() && !plan.HoldsConnection,
		claimSlots:   make(chan struct{}, claims),
		handoff:      make(chan []*Delivery, workers),
		notify:       make(chan struct{}),
		slots:        make([]*slot, workers),
		failed:       map[failureKey]struct{}{},
		settlers:     settlersBehind(plan, c.cfg, c.units, workers),
	}
	r.plan.SettleAndClaim = fusing(plan, c.cfg, c.units)
	if r.due, err = newDueWatch(c.db, plan, c.binding()); err != nil {
		return nil, err
	}
	if r.otherKinds, err = c.findOtherKinds(plan); err != nil {
		return nil, err
	}
	return r, nil
}

// budget returns how many workers run, and how many claims may be in flight at once, within the
// pool's connections (db.SetMaxOpenConns): one stays free for the application, the form may keep
// one of its own (Plan.OwnConnection), and where each delivery in work holds one
// (Plan.HoldsConnection) the workers are cut to the rest, with a warning. Where one claim takes
// rows for several workers (see next), or claims must not run side by side (Plan.SerialClaims),
// one claim is in flight.
func (c *Consumer) budget(plan Plan, log *slog.Logger) (workers, claims int, err error) {
	workers = c.cfg.Workers
	claims = workers
	if max := c.db.Stats().MaxOpenConnections; max > 0 {
		deliveries := max - 1 // connections deliveries may hold: one stays free for the application
		if plan.OwnConnection {
			deliveries--
		}
		switch {
		case max < 2:
			return 0, 0, sentinel.Errorf(nil, sentinel.Queue(plan.Table, c.cfg.Queue), "the pool allows %d connection, which leaves none for the application: raise db.SetMaxOpenConns to at least 2", max)
		case plan.HoldsConnection && deliveries < 1:
			return 0, 0, sentinel.Errorf(nil, sentinel.Queue(plan.Table, c.cfg.Queue), "the pool allows %d connections, which leaves none for a delivery: raise db.SetMaxOpenConns to at least 3", max)
		case plan.HoldsConnection && workers > deliveries:
			log.Warn("inbox: running fewer workers than configured: each delivery in work holds a pooled connection, and one stays free for the application", "workers", workers, "running", deliveries, "max_open_conns", max, "form_keeps", plan.OwnConnection)
			workers = deliveries
		}
		claims = min(workers, max-1)
	}
	if plan.SerialClaims || (!plan.HoldsConnection && !c.units.batched()) {
		// One claim in flight takes a row for every worker waiting or settling meanwhile: the
		// claims that would otherwise run side by side, a row each, share one statement and one
		// commit. A batch claim serves its own worker only, so batches claim side by side.
		claims = 1
	}
	return workers, claims, nil
}

// start starts the run's goroutines: the settlers behind the workers, the wake-ups, the
// workers, the extender, the search for unclaimable rows, the sweeper (Config.Retention), the
// cancel poll (Table.CancelledAt) and the pool's watch. stop ends them.
func (r *run) start(ctx context.Context) {
	if r.settlers > 0 {
		r.behind = make(chan settlement)
		r.behindDone.Add(r.settlers)
		for range r.settlers {
			go r.settleBehind(ctx, r.behindDone.Done)
		}
	}
	r.handlerCtx, r.cancelHandlers = context.WithCancel(context.WithoutCancel(ctx))

	wakeups := make(chan struct{}, 1)
	r.unlisten = listen(r.plan.Table, wakeups)
	go r.relayWakeups(ctx, wakeups)
	if w := r.c.cfg.Wakeups; w != nil {
		r.background(func() { w.Watch(ctx, r.plan.Table, r.log, r.wakeAll) })
	}
	for i := range r.slots {
		s := &slot{exited: make(chan struct{})}
		r.slots[i] = s
		go r.work(ctx, s)
	}
	r.background(func() { r.extend(ctx) })
	if r.c.cfg.HandlerTimeout > 0 || r.c.kinds.timed() {
		r.background(func() { r.watchTimeouts(ctx, timeoutTick) })
	}
	if find := r.plan.FindUnclaimable; find != nil {
		r.background(func() { watchUnclaimable(ctx, find, r.log) })
	}
	if r.otherKinds != nil {
		r.background(func() { watchOtherKinds(ctx, r.otherKinds, r.log, unclaimableEvery) })
	}
	if s := r.sweeper(); s != nil {
		r.background(func() { s.run(ctx) })
	}
	if p := r.cancelPoll(); p != nil {
		// Until the handlers' context ends, so that a handler draining at shutdown is told too.
		r.background(func() { p.run(r.handlerCtx) })
	}
	r.stopWatch, r.watchDone = make(chan struct{}), make(chan struct{})
	go r.watchPool(r.stopWatch, r.watchDone)
}

// background runs f in a goroutine that stop waits for.
func (r *run) background(f func()) {
	r.running.Add(1)
	go func() {
		defer r.running.Done()
		f()
	}()
}

// stop ends the run once its context is done: it lets the handlers in work finish within the
// shutdown timeout, waits for the settlements behind them and the run's goroutines, then closes
// the form. Closing may wait for a statement an abandoned handler runs on a connection the form
// also uses (database/sql closes a prepared statement only once each connection it was prepared
// on is free): stop does not wait for that longer than shutdownGrace past the shutdown timeout,
// and the rest finishes in the background.
func (r *run) stop(closeForm func()) {
	defer r.cancelHandlers()
	defer r.unlisten()
	defer func() {
		close(r.stopWatch)
		<-r.watchDone
	}()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		r.shutdown()
		if r.behind != nil {
			close(r.behind)
			r.behindDone.Wait()
		}
		r.running.Wait()
		closeForm()
	}()
	grace := time.NewTimer(r.c.cfg.ShutdownTimeout + shutdownGrace)
	defer grace.Stop()
	select {
	case <-finished:
	case <-grace.C:
		r.log.Warn("inbox: giving rows back and closing the form outlast the shutdown timeout, waiting for statements the abandoned handlers still run; Run returns and they finish in the background, the form free again once they have", "shutdown_timeout", r.c.cfg.ShutdownTimeout)
	}
}

// runGroups are the run's goroutines that stop waits for.
type runGroups struct {
	behindDone sync.WaitGroup // the settlers behind the workers
	running    sync.WaitGroup // the waker, the extender and the search for unclaimable rows
}
