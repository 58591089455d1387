package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// allocFreeForm hands out deliveries made before the run and only counts settlements: it
// allocates nothing per row, so that whatever a run allocates per row is the consumer's.
type allocFreeForm struct {
	plan    Plan
	mu      sync.Mutex
	rows    []*Delivery // not claimed yet
	want    int64
	settled atomic.Int64
	done    chan struct{} // closed by the settlement of the last row
}

func newAllocFreeForm(rows int) *allocFreeForm {
	ds := make([]Delivery, rows)
	f := &allocFreeForm{plan: Plan{Table: "alloc_jobs", Described: Table{RetryAfter: "retry_after"}}, rows: make([]*Delivery, rows), want: int64(rows), done: make(chan struct{})}
	for i := range ds {
		ds[i] = Delivery{ID: int64(i + 1), Attempt: 1}
		f.rows[i] = &ds[i]
	}
	return f
}

func (f *allocFreeForm) Open(context.Context, *sql.DB, Binding) (Plan, error) { return f.plan, nil }

func (f *allocFreeForm) Claim(_ context.Context, max int) ([]*Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(max, len(f.rows))
	ds := f.rows[:n:n]
	f.rows = f.rows[n:]
	return ds, nil
}

func (f *allocFreeForm) ClaimBatch(ctx context.Context, max int) ([]*Delivery, error) {
	return f.Claim(ctx, max)
}

func (f *allocFreeForm) Settle(context.Context, *Delivery, outcome.Outcome) error {
	f.count(1)
	return nil
}

func (f *allocFreeForm) SettleBatch(_ context.Context, ds []*Delivery, _ []outcome.Outcome) error {
	f.count(len(ds))
	return nil
}

func (f *allocFreeForm) count(settled int) {
	if f.settled.Add(int64(settled)) == f.want {
		close(f.done)
	}
}

func (f *allocFreeForm) Extend(context.Context, *Delivery) error         { return nil }
func (f *allocFreeForm) Release(context.Context, *Delivery) error        { return nil }
func (f *allocFreeForm) ReleaseBatch(context.Context, []*Delivery) error { return nil }
func (f *allocFreeForm) Close() error                                    { return nil }

const allocBatchSize = 16

var (
	ackEach  = HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	acks     = [allocBatchSize]outcome.Outcome{}
	ackBatch = BatchHandlerFunc(func(_ context.Context, ds []*Delivery) []outcome.Outcome { return acks[:len(ds)] })
)

func init() {
	for i := range acks {
		acks[i] = outcome.Ack()
	}
}

// countingObserver counts what it is told, as a metrics observer would, and allocates nothing.
type countingObserver struct {
	claims, handled, settled atomic.Int64
}

func (o *countingObserver) Claimed(_ context.Context, c Claim) { o.claims.Add(1) }

func (o *countingObserver) Handling(ctx context.Context, u Unit) context.Context {
	o.handled.Add(int64(len(u.Deliveries)))
	return ctx
}

func (o *countingObserver) Settled(_ context.Context, s Settlement) {
	o.settled.Add(int64(len(s.Outcomes)))
}

// drain runs a consumer of f's rows, single or in batches, with obs as its Observer (nil: none)
// and handlers bounded by timeout (below zero: no bound) until every row is settled, and returns
// the heap allocations counted from Run's start to the last settlement.
func drain(tb testing.TB, f *allocFreeForm, batch bool, workers int, obs Observer, timeout time.Duration) uint64 {
	tb.Helper()
	cfg := &Config{Workers: workers, Observer: obs, HandlerTimeout: timeout}
	c := NewConsumer(noDB(0), f, ackEach, cfg)
	if batch {
		c = NewBatchConsumer(noDB(0), f, allocBatchSize, ackBatch, cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	gaveUp := time.NewTimer(time.Minute)
	defer gaveUp.Stop()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	go func() { errc <- c.Run(ctx) }()
	select {
	case <-f.done:
	case err := <-errc:
		tb.Fatalf("Run returned before every row was settled: %v", err)
	case <-gaveUp.C:
		tb.Fatalf("%d of %d rows settled in a minute", f.settled.Load(), f.want)
	}
	runtime.ReadMemStats(&after)

	cancel()
	if err := <-errc; err != nil {
		tb.Fatal(err)
	}
	return after.Mallocs - before.Mallocs
}

func BenchmarkConsumerSingle(b *testing.B) { benchmarkConsumer(b, false) }
func BenchmarkConsumerBatch(b *testing.B)  { benchmarkConsumer(b, true) }

// benchmarkConsumer drains b.N rows through one Run, without an observer and with one;
// allocs/msg counts from Run's start, so its setup is amortised over the rows.
func benchmarkConsumer(b *testing.B, batch bool) {
	for _, observed := range []bool{false, true} {
		for _, workers := range []int{1, 4} {
			b.Run(fmt.Sprintf("observer=%v/workers=%d", observed, workers), func(b *testing.B) {
				f := newAllocFreeForm(b.N)
				var obs Observer
				if observed {
					obs = &countingObserver{}
				}
				b.ReportAllocs()
				b.ResetTimer()
				mallocs := drain(b, f, batch, workers, obs, -1)
				b.ReportMetric(float64(mallocs)/float64(b.N), "allocs/msg")
			})
		}
	}
}

// perMessageBound is the most the consumer may allocate per message in its steady state, its
// handlers unbounded in time. The aim is none; the bound leaves room for what varies between runs (a worker idling once more at
// the end, a timer) while an allocation per claim of a 16-row batch, 1/16 = 0.0625 a message,
// still fails it.
const perMessageBound = 0.05

// TestConsumerAllocatesNothingPerMessage drains 2,000 rows and then 4,000 through each kind of
// consumer, without an observer and with one that allocates nothing, its handlers unbounded in
// time and bounded: Run's setup and shutdown cost both runs alike, so the difference is what the
// 2,000 more rows cost. It keeps the least of three tries, against a stray allocation elsewhere
// in the process. A time bound costs one allocation a unit, the handler's context with the unit's
// deadline, made new each time because a context must not change once given out.
func TestConsumerAllocatesNothingPerMessage(t *testing.T) {
	const few, many = 2000, 4000
	for _, observed := range []bool{false, true} {
		for _, batch := range []bool{false, true} {
			for _, workers := range []int{1, 4} {
				for _, timeout := range []time.Duration{-1, DefaultHandlerTimeout} {
					bound := perMessageBound
					if timeout > 0 && batch {
						bound += 1.0 / allocBatchSize
					} else if timeout > 0 {
						bound++
					}
					t.Run(fmt.Sprintf("observer=%v/batch=%v/workers=%d/timeout=%v", observed, batch, workers, timeout), func(t *testing.T) {
						best := float64(1 << 30)
						for try := 0; try < 3 && best > bound; try++ {
							counts := &countingObserver{}
							var obs Observer
							if observed {
								obs = counts
							}
							small := drain(t, newAllocFreeForm(few), batch, workers, obs, timeout)
							large := drain(t, newAllocFreeForm(many), batch, workers, obs, timeout)
							best = min(best, (float64(large)-float64(small))/(many-few))
							if handled, settled := counts.handled.Load(), counts.settled.Load(); observed && (handled != few+many || settled != handled) {
								t.Fatalf("the observer was told of %d rows handled and %d settled, want %d each", handled, settled, few+many)
							}
						}
						if best > bound {
							t.Fatalf("the consumer allocates %.3f times per message in its steady state, want at most %v", best, bound)
						}
						t.Logf("%.4f allocations per message", best)
					})
				}
			}
		}
	}
}
