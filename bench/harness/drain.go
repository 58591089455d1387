package harness

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// LibraryDrain is one drain of a prefilled table through the library's consumer.
type LibraryDrain struct {
	// Rate is rows per second from the first claim's start to the last row's settlement, as a
	// raw loop is timed from its first claim (its statements prepared before) to its last.
	Rate float64
	// Allocs is heap allocations per row over Run, its start and shutdown included.
	Allocs float64
	// Wall is Run's whole time, from its start to its return, as a peer's drain is timed from
	// its client's start to its stop.
	Wall time.Duration
	// Open is Run's time before the first claim (the server and schema checks, the statements
	// prepared), Shutdown its time after the last settlement.
	Open, Shutdown time.Duration
	// Note says how many rows were handled again after a settlement failed, if one did.
	Note string
	// Claims, EmptyClaims and RowsClaimed count the form's claims, those that found nothing
	// (each sends a worker to sleep for the poll interval) and the rows they claimed.
	Claims, EmptyClaims, RowsClaimed int64
	// Traffic is what Run sent, from its start to its return, on a counting target
	// (OpenCounting); zero on another. After a failed settlement it has the drain's counts of
	// the rows left too.
	Traffic Traffic
}

// DrainLibrary drains the want rows prefilled in c's table through the consumer c describes,
// with the drain check: no row of c's queue left unsettled, every row handled once. A settlement that fails (a
// deadlock on MySQL or MariaDB, say) gives its rows back and the drain goes on until the table is
// empty, the rows handled again counted in the Note. A failed drain check is a *CheckError.
func DrainLibrary(ctx context.Context, t *Target, c Consumer, want int64) (LibraryDrain, error) {
	var round LibraryDrain
	var handled atomic.Int64
	counts := newDrainCounts(want)
	handle := c.Handle
	c.Handle = func(payload []byte) {
		handled.Add(1)
		if handle != nil {
			handle(payload)
		}
	}
	c.counts = counts
	consumer, err := c.Build(t)
	if err != nil {
		return round, err
	}
	meter, err := t.StartMeter(ctx)
	if err != nil {
		return round, err
	}
	mallocs := Mallocs()
	start := time.Now()
	run := Start(ctx, consumer)
	defer run.Stop()
	stopped := func() error {
		return fmt.Errorf("the consumer stopped before the table was drained (%d of %d settled): %v", counts.settled.Load(), want, run.Err())
	}
	var settled time.Time // when the last row settled
	select {
	case <-counts.all:
		settled = time.Unix(0, counts.lastSettled.Load())
	case <-counts.failed:
		// The failed settlement's rows come back and settle later, or some of them settled
		// after all (a lease lost on part of a batch): the table says when every row is gone.
		for {
			left, err := c.left(ctx, t)
			if err != nil {
				return round, err
			}
			if left == 0 {
				break
			}
			select {
			case <-run.Done():
				return round, stopped()
			case <-time.After(10 * time.Millisecond):
			}
		}
		settled = time.Now()
	case <-run.Done():
		return round, stopped()
	case <-ctx.Done():
		return round, ctx.Err()
	}
	if err := run.Stop(); err != nil {
		return round, err
	}
	round.Wall = time.Since(start)
	round.Allocs = float64(Mallocs()-mallocs) / float64(want)
	if round.Traffic, err = meter.Stop(ctx); err != nil {
		return round, err
	}
	firstClaim := time.Unix(0, counts.firstClaim.Load())
	round.Open, round.Shutdown = firstClaim.Sub(start), time.Since(settled)
	round.Claims, round.EmptyClaims, round.RowsClaimed = counts.claims.Load(), counts.empty.Load(), counts.rows.Load()
	n := handled.Load()
	select {
	case <-counts.failed:
		// A row handled again after a failed settlement gave it back is no double delivery.
		round.Note = fmt.Sprintf("a settlement failed (see the log) and %d rows were handled again", n-want)
		n = want
	default:
	}
	left, err := c.left(ctx, t)
	if err != nil {
		return round, err
	}
	if err := Check(c.Table, left, n, want); err != nil {
		return round, err
	}
	round.Rate = float64(want) / settled.Sub(firstClaim).Seconds()
	return round, nil
}

// Running is a Runner run in the background (Start) until it is stopped, or stops on its own.
type Running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start runs r in the background until ctx is done or Stop is called.
func Start(ctx context.Context, r Runner) *Running {
	runCtx, cancel := context.WithCancel(ctx)
	run := &Running{cancel: cancel, done: make(chan struct{})}
	go func() {
		run.err = r.Run(runCtx)
		close(run.done)
	}()
	return run
}

// Done is closed once Run has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err waits for Run to return, and is what it returned.
func (r *Running) Err() error {
	<-r.done
	return r.err
}

// Stop cancels Run's context and waits for Run to return; it is what Run returned. It may be
// called again, and after Run stopped on its own.
func (r *Running) Stop() error {
	r.cancel()
	return r.Err()
}

// Mallocs is the process's heap allocations so far.
func Mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// drainCounts follows a library drain through its form: when the first claim began, the rows
// settled and when the last did, whether a settlement failed, and the claims.
type drainCounts struct {
	want                int64
	firstClaim          atomic.Int64 // Unix nanoseconds
	lastSettled         atomic.Int64 // Unix nanoseconds
	settled             atomic.Int64
	all                 chan struct{} // closed when every row has settled
	failed              chan struct{} // closed at the first settlement that failed
	failOnce            sync.Once
	claims, empty, rows atomic.Int64
}

func newDrainCounts(want int64) *drainCounts {
	return &drainCounts{want: want, all: make(chan struct{}), failed: make(chan struct{})}
}

// claiming marks the start of a claim.
func (c *drainCounts) claiming() { c.firstClaim.CompareAndSwap(0, time.Now().UnixNano()) }

// claimed counts a claim that returned n rows.
func (c *drainCounts) claimed(n int, err error) {
	c.claims.Add(1)
	c.rows.Add(int64(n))
	if err == nil && n == 0 {
		c.empty.Add(1)
	}
}

// settledRows counts the n rows of a settlement that succeeded, and returns its error. Only
// whole successes count, so the count reaches want exactly when every row settled and no
// settlement failed.
func (c *drainCounts) settledRows(n int, err error) error {
	if err != nil {
		c.failOnce.Do(func() { close(c.failed) })
		return err
	}
	if c.settled.Add(int64(n)) == c.want {
		c.lastSettled.Store(time.Now().UnixNano())
		close(c.all)
	}
	return nil
}
