package inbox

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// gateForm is a fake form whose settlements wait until the test opens its gate, and which
// records the order of settlements and Close.
type gateForm struct {
	*fakeForm
	gate chan struct{}

	mu     sync.Mutex
	events []string
}

func (f *gateForm) Settle(ctx context.Context, d *Delivery, o outcome.Outcome) error {
	<-f.gate
	f.note("settled")
	return f.fakeForm.Settle(ctx, d, o)
}

func (f *gateForm) Close() error {
	f.note("closed")
	return f.fakeForm.Close()
}

func (f *gateForm) note(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

// handledWhileGated runs a consumer of rows 1 to 20 through f with cfg, its handler returning o, waits until its
// handlers stop being called while f's gate is shut, and returns how many rows were handled,
// then opens the gate and checks that Run returns only once every handled row has settled,
// before the form closes.
func handledWhileGated(t *testing.T, f *gateForm, cfg *Config, o outcome.Outcome) int {
	t.Helper()
	var mu sync.Mutex
	handled := 0
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		mu.Lock()
		defer mu.Unlock()
		handled++
		return o
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- NewConsumer(noDB(0), f, h, cfg).Run(ctx) }()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return handled
	}
	for last := -1; count() != last; {
		last = count()
		time.Sleep(50 * time.Millisecond)
	}
	n := count()
	cancel()
	select {
	case err := <-errc:
		t.Fatalf("Run returned (%v) while %d handled rows had not settled", err, n)
	case <-time.After(100 * time.Millisecond):
	}
	close(f.gate)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := f.settledCount(); got != n {
		t.Errorf("%d rows settled, want the %d handled", got, n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.Index(f.events, "closed"); i != len(f.events)-1 {
		t.Errorf("events %v: the form closed before every settlement returned", f.events)
	}
	return n
}

// TestSettlementsRunBehindTheirWorker: where a delivery holds nothing of its worker's (the lease
// form outside transactional mode), the worker hands its settlement over and handles its next
// rows while it commits, up to behindPerWorker settlements, and Run waits for them all.
func TestSettlementsRunBehindTheirWorker(t *testing.T) {
	for _, workers := range []int{1, 3} {
		f := &gateForm{fakeForm: newFakeForm("jobs", rowIDs(20)...), gate: make(chan struct{})}
		got := handledWhileGated(t, f, &Config{Workers: workers, PollInterval: 10 * time.Millisecond}, outcome.Ack())
		// Each settler waits at the gate with a row, and each worker waits to hand over one more.
		if want := (behindPerWorker + 1) * workers; got != want {
			t.Errorf("%d workers: %d rows handled while every settlement waited, want %d", workers, got, want)
		}
	}
}

// TestSettlementsRunInTheirWorkerWhereItsHoldIsItsOwn: a delivery that holds a connection, a
// transactional one, one whose form claims with the settlement, and a retry settle in their
// worker, which
// handles nothing more until the settlement returns.
func TestSettlementsRunInTheirWorkerWhereItsHoldIsItsOwn(t *testing.T) {
	cases := []struct {
		name string
		set  func(*gateForm, *Config)
		o    outcome.Outcome
		want int
	}{
		{"holds a connection", func(f *gateForm, _ *Config) { f.plan.HoldsConnection = true }, outcome.Ack(), 2},
		{"transactional", func(_ *gateForm, c *Config) { c.Transactional = true }, outcome.Ack(), 2},
		// A retried row is back in the queue before its worker claims again.
		{"a retry", func(*gateForm, *Config) {}, outcome.Retry(), 2},
		{"settles and claims", func(f *gateForm, c *Config) {
			c.Workers = 1 // two would take turns at the claim by timing alone
			f.plan.SettleAndClaim = settleThenClaim(f)
		}, outcome.Ack(), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &gateForm{fakeForm: newFakeForm("jobs", rowIDs(20)...), gate: make(chan struct{})}
			cfg := &Config{Workers: 2, PollInterval: 10 * time.Millisecond}
			tc.set(f, cfg)
			if got := handledWhileGated(t, f, cfg, tc.o); got != tc.want {
				t.Errorf("%d rows handled while every settlement waited, want %d", got, tc.want)
			}
		})
	}
}
