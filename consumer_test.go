package inbox

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// fakeForm is an in-memory form: it hands out queued rows and records what the consumer does
// with them.
type fakeForm struct {
	plan    Plan
	openErr []error // returned by successive Opens, then nil

	mu        sync.Mutex
	rows      []int64
	claimErr  []error // returned by successive Claims, then nil
	claims    int
	settled   map[int64][]outcome.Outcome
	released  []int64
	extended  map[int64]int
	extending map[int64]bool // an Extend is running
	overlap   bool           // an Extend overlapped the same row's Settle
	closed    int
	opened    chan struct{}   // closed by the first successful Open
	stuck     chan struct{}   // when set, Release waits for it to close, as a form waiting for a handler's statement would
	extendErr map[int64]error // what Extend of a row returns
}

func newFakeForm(table string, ids ...int64) *fakeForm {
	return &fakeForm{
		plan: Plan{Table: table, Described: Table{RetryAfter: "retry_after"}}, rows: ids,
		settled: map[int64][]outcome.Outcome{}, extended: map[int64]int{}, extending: map[int64]bool{},
		opened: make(chan struct{}),
	}
}

func (f *fakeForm) push(ids ...int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows = append(f.rows, ids...)
}

func (f *fakeForm) Open(ctx context.Context, db *sql.DB, q Binding) (Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.openErr) > 0 {
		err := f.openErr[0]
		f.openErr = f.openErr[1:]
		return Plan{}, err
	}
	select {
	case <-f.opened:
	default:
		close(f.opened)
	}
	return f.plan, nil
}

func (f *fakeForm) Claim(ctx context.Context, max int) ([]*Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	if len(f.claimErr) > 0 {
		err := f.claimErr[0]
		f.claimErr = f.claimErr[1:]
		return nil, err
	}
	var ds []*Delivery
	for len(f.rows) > 0 && len(ds) < max {
		ds = append(ds, &Delivery{ID: f.rows[0], Attempt: 1, Payload: []byte(`{"n":1}`)})
		f.rows = f.rows[1:]
	}
	return ds, nil
}

func (f *fakeForm) Extend(ctx context.Context, d *Delivery) error {
	f.mu.Lock()
	if err := f.extendErr[d.ID]; err != nil {
		f.mu.Unlock()
		return err
	}
	f.extending[d.ID] = true
	f.extended[d.ID]++
	f.mu.Unlock()
	time.Sleep(time.Millisecond) // widen the window in which a concurrent Settle would show
	f.mu.Lock()
	f.extending[d.ID] = false
	f.mu.Unlock()
	return nil
}

func (f *fakeForm) Settle(ctx context.Context, d *Delivery, o outcome.Outcome) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.extending[d.ID] {
		f.overlap = true
	}
	f.settled[d.ID] = append(f.settled[d.ID], o)
	return nil
}

func (f *fakeForm) Release(ctx context.Context, d *Delivery) error {
	if f.stuck != nil {
		<-f.stuck
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, d.ID)
	return nil
}

func (f *fakeForm) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func (f *fakeForm) settledCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.settled)
}

// noDB is a *sql.DB that never connects: the fake form needs none, and the consumer reads only
// its pool settings.
func noDB(maxOpen int) *sql.DB {
	db := sql.OpenDB(noConnector{})
	db.SetMaxOpenConns(maxOpen)
	return db
}

type noConnector struct{}

func (noConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("no database in this test")
}
func (noConnector) Driver() driver.Driver { return nil }

// rowIDs is the ids 1 to n, the rows of a fake form's queue.
func rowIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return ids
}

// peakHandler acks each delivery after holding it for hold, and records the most deliveries it
// held at once.
type peakHandler struct {
	hold   time.Duration
	inWork atomic.Int32
	most   atomic.Int32
}

func (h *peakHandler) Handle(ctx context.Context, d *Delivery) outcome.Outcome {
	raise(&h.most, h.inWork.Add(1))
	time.Sleep(h.hold)
	h.inWork.Add(-1)
	return outcome.Ack()
}

// raise lifts a to n if n is more than it holds, safely for goroutines racing to record a maximum.
func raise(a *atomic.Int32, n int32) {
	for m := a.Load(); n > m && !a.CompareAndSwap(m, n); m = a.Load() {
	}
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// running is a consumer's Run in a goroutine of its own.
type running struct {
	cancel context.CancelFunc
	errc   chan error // what Run returned, once it has
}

func startRun(c *Consumer) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- c.Run(ctx) }()
	return r
}

// stop cancels Run's context and returns what Run returned; a Run that has not returned 10 s
// later ends the test with late.
func (r *running) stop(t *testing.T, late string) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal(late)
		return nil
	}
}

// runUntil runs c until done reports true (or 10 s pass, which fails the test), then stops it
// and returns Run's error.
func runUntil(t *testing.T, c *Consumer, done func() bool) error {
	t.Helper()
	r := startRun(c)
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		select {
		case err := <-r.errc:
			r.cancel()
			return err
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.cancel()
			t.Fatal("the consumer did not get there within 10 s")
		}
	}
	return r.stop(t, "Run did not return after its context was cancelled")
}

func TestConsumerSettlesEveryRowOnce(t *testing.T) {
	ids := rowIDs(200)
	f := newFakeForm("jobs", ids...)
	h := &peakHandler{hold: time.Millisecond}
	c := NewConsumer(noDB(0), f, h, &Config{Workers: 4, PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == len(ids) }); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got := f.settled[id]; len(got) != 1 || got[0].Kind() != outcome.KindAck {
			t.Fatalf("row %d settled %v, want one ack", id, got)
		}
	}
	if h.most.Load() > 4 {
		t.Fatalf("%d handlers ran at once with 4 workers", h.most.Load())
	}
	if f.closed != 1 {
		t.Fatalf("form closed %d times, want 1", f.closed)
	}
}

func TestConsumerTurnsPanicsAndMissingOutcomesIntoRetry(t *testing.T) {
	f := newFakeForm("jobs", 1, 2)
	var logs logBuffer
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		if d.ID == 1 {
			panic("boom")
		}
		return outcome.Outcome{}
	})
	c := NewConsumer(noDB(0), f, h, &Config{Logger: logs.logger(), PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 2 }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2} {
		if got := f.settled[id]; len(got) != 1 || got[0].Kind() != outcome.KindRetryAfter || got[0].Delay() <= 0 || got[0].Err() == nil {
			t.Fatalf("row %d settled %v, want one retry after the policy's delay, with its reason", id, got)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "panicked") || !strings.Contains(out, "boom") || !strings.Contains(out, "consumer_test.go") {
		t.Fatalf("the panic was not logged with its value and stack:\n%s", out)
	}
	if !strings.Contains(out, "zero outcome") {
		t.Fatalf("the missing outcome was not logged:\n%s", out)
	}
}

func TestJSONHandlerSettlesUndecodablePayloadsByPolicy(t *testing.T) {
	type order struct{ N int }
	for _, tc := range []struct {
		policy outcome.Outcome
		want   outcome.Kind
	}{{outcome.Outcome{}, outcome.KindDrop}, {outcome.Retry(), outcome.KindRetryAfter}} {
		f := newFakeForm("jobs", 1)
		f.Claim(context.Background(), 0) // nothing; the row is replaced below with a bad payload
		var called atomic.Bool
		h := JSON(func(ctx context.Context, d *Delivery, v order) outcome.Outcome {
			called.Store(true)
			return outcome.Ack()
		})
		bad := &badPayloadForm{fakeForm: f}
		var logs logBuffer
		c := NewConsumer(noDB(0), bad, h, &Config{Logger: logs.logger(), UndecodablePayload: tc.policy, PollInterval: 10 * time.Millisecond})
		if err := runUntil(t, c, func() bool { return f.settledCount() == 1 }); err != nil {
			t.Fatal(err)
		}
		if called.Load() {
			t.Fatal("the handler was called with a payload that does not decode")
		}
		if got := f.settled[1]; len(got) != 1 || got[0].Kind() != tc.want {
			t.Fatalf("policy %v: settled %v, want %v", tc.policy, got, tc.want)
		}
		if !strings.Contains(logs.String(), "does not decode") {
			t.Fatalf("the undecodable payload was not logged:\n%s", logs.String())
		}
	}
}

// badPayloadForm hands out rows whose payload is not JSON.
type badPayloadForm struct{ *fakeForm }

func (b *badPayloadForm) Claim(ctx context.Context, max int) ([]*Delivery, error) {
	ds, err := b.fakeForm.Claim(ctx, max)
	for _, d := range ds {
		d.Payload = []byte("{not json")
	}
	return ds, err
}

func TestJSONHandlerDecodesPayload(t *testing.T) {
	type order struct{ N int }
	var got order
	h := JSON(func(ctx context.Context, d *Delivery, v order) outcome.Outcome {
		got = v
		return outcome.Ack()
	})
	if o := h.Handle(context.Background(), &Delivery{Payload: []byte(`{"N":7}`)}); o.Kind() != outcome.KindAck || got.N != 7 {
		t.Fatalf("outcome %v, decoded %+v; want ack and N=7", o, got)
	}
}

func TestShutdownLetsHandlersFinishThenAbandonsTheRest(t *testing.T) {
	f := newFakeForm("jobs", 1, 2)
	started := make(chan int64, 2)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		started <- d.ID
		if d.ID == 1 {
			time.Sleep(50 * time.Millisecond) // finishes within the shutdown timeout
			return outcome.Ack()
		}
		select {} // never returns, whatever its context says
	})
	c := NewConsumer(noDB(0), f, h, &Config{Workers: 2, ShutdownTimeout: 300 * time.Millisecond})
	r := startRun(c)
	<-started
	<-started
	if err := r.stop(t, "Run did not return after the shutdown timeout"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.settled[1]; len(got) != 1 || got[0].Kind() != outcome.KindAck {
		t.Fatalf("row 1 settled %v, want the ack its handler returned during shutdown", got)
	}
	if _, ok := f.settled[2]; ok || len(f.released) != 1 || f.released[0] != 2 {
		t.Fatalf("row 2: settled %v, released %v; want released and not settled", f.settled[2], f.released)
	}
}

// TestShutdownDoesNotWaitForAFormStuckGivingRowsBack: a form that cannot give an abandoned row
// back (waiting for a statement its handler still runs) keeps Run no longer than the shutdown
// timeout and a grace; the queue is free for another consumer at once, and the form closes, free
// for another Run, once it has given the row back.
func TestShutdownDoesNotWaitForAFormStuckGivingRowsBack(t *testing.T) {
	f := newFakeForm("jobs", 1)
	f.stuck = make(chan struct{})
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		close(started)
		select {} // never returns, whatever its context says
	})
	var logs logBuffer
	const timeout = 100 * time.Millisecond
	c := NewConsumer(noDB(0), f, h, &Config{Queue: "q", ShutdownTimeout: timeout, Logger: logs.logger()})
	r := startRun(c)
	<-started
	stopped := time.Now()
	if err := r.stop(t, "Run waited for the form to give the abandoned row back"); err != nil {
		t.Fatal(err)
	}
	if took, limit := time.Since(stopped), timeout+shutdownGrace+2*time.Second; took > limit {
		t.Errorf("Run returned %v after its context ended, want at most %v", took, limit)
	}
	if !strings.Contains(logs.String(), "finish in the background") {
		t.Errorf("the log does not say the rest finishes in the background:\n%s", logs.String())
	}
	done, doneCancel := context.WithCancel(context.Background())
	doneCancel()
	if err := NewConsumer(noDB(0), newFakeForm("jobs"), h, &Config{Queue: "q"}).Run(done); err != nil {
		t.Errorf("another consumer of the queue after Run returned: %v", err)
	}
	if err := NewConsumer(noDB(0), f, h, &Config{Queue: "q"}).Run(done); !errors.Is(err, ErrAlreadyConsuming) {
		t.Errorf("the form still giving a row back, in another consumer: %v, want ErrAlreadyConsuming", err)
	}

	close(f.stuck)
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		closed, released := f.closed, f.released
		f.mu.Unlock()
		if closed == 1 {
			if len(released) != 1 || released[0] != 1 {
				t.Errorf("released %v before Close, want row 1", released)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the form was not closed after it gave the row back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for try := 0; ; try++ { // releaseForm runs just after Close
		err := NewConsumer(noDB(0), f, h, &Config{Queue: "q"}).Run(done)
		if err == nil {
			break
		}
		if try == 100 {
			t.Fatalf("the closed form in another consumer: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConsumerKeepsAConnectionForTheApplication(t *testing.T) {
	ids := rowIDs(40)
	f := newFakeForm("jobs", ids...)
	f.plan.HoldsConnection = true
	h := &peakHandler{hold: 5 * time.Millisecond}
	var logs logBuffer
	c := NewConsumer(noDB(3), f, h, &Config{Workers: 8, Logger: logs.logger(), PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == len(ids) }); err != nil {
		t.Fatal(err)
	}
	if h.most.Load() != 2 {
		t.Fatalf("%d deliveries in work at most with a pool of 3; want 2", h.most.Load())
	}
	if n := strings.Count(logs.String(), "running fewer workers"); n != 1 {
		t.Fatalf("the reduced worker count was logged %d times, want once:\n%s", n, logs.String())
	}
	if err := NewConsumer(noDB(1), newFakeForm("jobs"), h, nil).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "SetMaxOpenConns") {
		t.Fatalf("a pool of one connection: Run returned %v, want an error naming SetMaxOpenConns", err)
	}
}

// TestConsumerCountsTheFormsOwnConnection: a form that keeps a connection of its own (the
// lease form) and holds one per delivery (in transactional mode) leaves the consumer the pool's
// size less two for deliveries; a pool of two leaves none, and Run says so.
func TestConsumerCountsTheFormsOwnConnection(t *testing.T) {
	ids := rowIDs(40)
	f := newFakeForm("jobs", ids...)
	f.plan.HoldsConnection, f.plan.OwnConnection = true, true
	h := &peakHandler{hold: 5 * time.Millisecond}
	c := NewConsumer(noDB(5), f, h, &Config{Workers: 8, PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == len(ids) }); err != nil {
		t.Fatal(err)
	}
	if h.most.Load() != 3 {
		t.Fatalf("%d deliveries in work at most with a pool of 5 and the form keeping one; want 3", h.most.Load())
	}
	two := newFakeForm("jobs")
	two.plan.HoldsConnection, two.plan.OwnConnection = true, true
	if err := NewConsumer(noDB(2), two, h, nil).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "SetMaxOpenConns to at least 3") {
		t.Fatalf("a pool of two with the form keeping one: Run returned %v, want an error naming SetMaxOpenConns and 3", err)
	}
}

func TestPublishWakesIdleConsumers(t *testing.T) {
	f := newFakeForm("wake_jobs")
	var handled atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		handled.Add(1)
		return outcome.Ack()
	})
	c := NewConsumer(noDB(0), f, h, &Config{Workers: 3, PollInterval: time.Hour})
	err := runUntil(t, c, func() bool {
		f.mu.Lock()
		claimed := f.claims
		f.mu.Unlock()
		if claimed >= 3 && handled.Load() == 0 && len(f.rows) == 0 {
			// Every worker found nothing and sleeps for an hour; only a wake-up brings the row.
			f.push(1)
			wake("wake_jobs")
		}
		return handled.Load() == 1
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestConsumerRefusesASecondConsumerOfTheQueue(t *testing.T) {
	db := noDB(0)
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	first := newFakeForm("jobs")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- NewConsumer(db, first, h, &Config{Queue: "q"}).Run(ctx) }()
	<-first.opened
	err := NewConsumer(db, newFakeForm("jobs"), h, &Config{Queue: "q"}).Run(ctx)
	if !errors.Is(err, ErrAlreadyConsuming) {
		t.Fatalf("second consumer: %v, want ErrAlreadyConsuming", err)
	}
	if !strings.Contains(err.Error(), `"q"`) || !strings.Contains(err.Error(), `"jobs"`) {
		t.Fatalf("the error does not name the queue and table: %v", err)
	}
	if err := NewConsumer(db, first, h, &Config{Queue: "other"}).Run(ctx); !errors.Is(err, ErrAlreadyConsuming) {
		t.Fatalf("the same form value in a second consumer: %v, want ErrAlreadyConsuming", err)
	}
	// Another queue of the same table is another consumer's business.
	other, otherCancel := context.WithCancel(ctx)
	otherCancel()
	if err := NewConsumer(db, newFakeForm("jobs"), h, &Config{Queue: "other"}).Run(other); err != nil {
		t.Fatalf("a consumer of another queue: %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestConsumerRetriesClaimsAndOpensThatFail(t *testing.T) {
	down := errors.New("connection refused")
	f := newFakeForm("jobs", 1)
	f.openErr = []error{down}
	f.claimErr = []error{down, down, down}
	var logs logBuffer
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{Logger: logs.logger(), PollInterval: 5 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 1 }); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Count(out, "claim failed") != 1 || !strings.Contains(out, "claims succeed again") {
		t.Fatalf("want one log line for the failing claims and one for the recovery:\n%s", out)
	}
	if !strings.Contains(out, "opening the consumer failed") {
		t.Fatalf("the failed open was not logged:\n%s", out)
	}
}

func TestConsumerFailsAtOnceOnSchemaErrors(t *testing.T) {
	f := newFakeForm("jobs")
	f.openErr = []error{ErrSchema}
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	if err := NewConsumer(noDB(0), f, h, nil).Run(context.Background()); !errors.Is(err, ErrSchema) {
		t.Fatalf("Run: %v, want ErrSchema", err)
	}
}

func TestConsumerExtendsHoldsWhileHandlersRun(t *testing.T) {
	f := newFakeForm("jobs", 1, 2)
	f.plan.ExtendEvery = 10 * time.Millisecond
	extended := func(id int64) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.extended[id]
	}
	// Each handler runs until its row has been extended twice, counted rather than timed: a
	// loaded machine may run a 10 ms ticker late. The limit bounds a failing run only.
	h := HandlerFunc(func(_ context.Context, d *Delivery) outcome.Outcome {
		for limit := time.Now().Add(5 * time.Second); extended(d.ID) < 2 && time.Now().Before(limit); {
			time.Sleep(time.Millisecond)
		}
		return outcome.Ack()
	})
	c := NewConsumer(noDB(0), f, h, &Config{Workers: 2})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 2 }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2} {
		if n := extended(id); n < 2 {
			t.Fatalf("row %d extended %d times in 5 s of its handler with a 10 ms interval", id, n)
		}
	}
	if f.overlap {
		t.Fatal("an extension ran during its row's settlement")
	}
}

// TestALostLeaseCancelsItsHandler: an extension that finds the hold lost (ErrLeaseLost) cancels
// its handler's context with that error as the cause; an extension that fails otherwise leaves
// the handler alone, and the worker's next handler gets a context that is not cancelled.
func TestALostLeaseCancelsItsHandler(t *testing.T) {
	lost := fmt.Errorf("%w: table \"jobs\", row 1: taken by another consumer", ErrLeaseLost)
	f := newFakeForm("jobs", 1, 2, 3)
	f.plan.ExtendEvery = 10 * time.Millisecond
	f.extendErr = map[int64]error{1: lost, 2: errors.New("connection reset")}
	var mu sync.Mutex
	causes := map[int64]error{}
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		var cause error
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(300 * time.Millisecond): // many extensions
		}
		mu.Lock()
		causes[d.ID] = cause
		mu.Unlock()
		return outcome.Ack()
	})
	var logs logBuffer
	c := NewConsumer(noDB(0), f, h, &Config{Logger: logs.logger()}) // one worker: rows 1, 2, 3 in turn
	if err := runUntil(t, c, func() bool { return f.settledCount() == 3 }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(causes[1], ErrLeaseLost) || causes[1] != lost {
		t.Errorf("the handler of the row whose lease was lost: context cause %v, want the extension's %v", causes[1], lost)
	}
	if causes[2] != nil || causes[3] != nil {
		t.Errorf("handlers of rows 2 (extension failing otherwise) and 3: context causes %v and %v, want none", causes[2], causes[3])
	}
	if !strings.Contains(logs.String(), "its context is cancelled") {
		t.Errorf("the lost lease was not logged:\n%s", logs.String())
	}
}

func TestConsumerSettlesRowsTheFormCouldNotDecode(t *testing.T) {
	f := newFakeForm("jobs", 1, 2)
	bad := &undecodableForm{fakeForm: f, bad: 1}
	var handled []int64
	var mu sync.Mutex
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		mu.Lock()
		handled = append(handled, d.ID)
		mu.Unlock()
		return outcome.Ack()
	})
	c := NewConsumer(noDB(0), bad, h, &Config{PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 2 }); err != nil {
		t.Fatal(err)
	}
	if len(handled) != 1 || handled[0] != 2 {
		t.Fatalf("handler called for %v, want row 2 only", handled)
	}
	if got := f.settled[1]; len(got) != 1 || got[0].Kind() != outcome.KindDrop {
		t.Fatalf("row 1 settled %v, want one drop (the default policy)", got)
	}
}

// undecodableForm marks one row as holding data that does not decode, as a form does for
// headers that are not a JSON object.
type undecodableForm struct {
	*fakeForm
	bad int64
}

func (u *undecodableForm) Claim(ctx context.Context, max int) ([]*Delivery, error) {
	ds, err := u.fakeForm.Claim(ctx, max)
	for _, d := range ds {
		if d.ID == u.bad {
			d.Undecodable(errors.New("headers are not a JSON object"))
		}
	}
	return ds, err
}

// slowSettleForm settles slowly and records the most rows a claim asked for.
type slowSettleForm struct {
	*fakeForm
	mostAsked atomic.Int32
}

func (f *slowSettleForm) Claim(ctx context.Context, max int) ([]*Delivery, error) {
	raise(&f.mostAsked, int32(max))
	return f.fakeForm.Claim(ctx, max)
}

func (f *slowSettleForm) Settle(ctx context.Context, d *Delivery, o outcome.Outcome) error {
	time.Sleep(5 * time.Millisecond)
	return f.fakeForm.Settle(ctx, d, o)
}

// TestSharedClaimsTakeRowsForWorkersWaitingOrSettling: where deliveries hold no connection,
// one claim in flight takes a row for every worker waiting or settling. The form claims with
// its settlements (as the lease form does on SQLite), so that each worker settles its own rows
// rather than handing them to the consumer to settle behind it.
func TestSharedClaimsTakeRowsForWorkersWaitingOrSettling(t *testing.T) {
	ids := rowIDs(60)
	f := &slowSettleForm{fakeForm: newFakeForm("jobs", ids...)}
	f.plan.SettleAndClaim = settleThenClaim(f)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{Workers: 4, PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == len(ids) }); err != nil {
		t.Fatal(err)
	}
	if got := f.mostAsked.Load(); got != 4 {
		t.Fatalf("the largest claim asked for %d rows, want 4: one for the claiming worker and one for each of the three waiting or settling", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims >= len(ids) {
		t.Fatalf("%d claims for %d rows: the claims were not shared", f.claims, len(ids))
	}
}

// settleClaimForm settles and claims in one call, and counts those calls.
type settleClaimForm struct {
	*fakeForm
	fused atomic.Int32
}

func (f *settleClaimForm) Open(ctx context.Context, db *sql.DB, q Binding) (Plan, error) {
	plan, err := f.fakeForm.Open(ctx, db, q)
	plan.SettleAndClaim = f.settleAndClaim
	return plan, err
}

func (f *settleClaimForm) settleAndClaim(ctx context.Context, d *Delivery, o outcome.Outcome, max int) ([]*Delivery, error, error) {
	f.fused.Add(1)
	return settleThenClaim(f)(ctx, d, o, max)
}

// settleThenClaim is a Plan.SettleAndClaim for f that settles by f.Settle, then claims by
// f.Claim.
func settleThenClaim(f Form) func(context.Context, *Delivery, outcome.Outcome, int) ([]*Delivery, error, error) {
	return func(ctx context.Context, d *Delivery, o outcome.Outcome, max int) ([]*Delivery, error, error) {
		settleErr := f.Settle(ctx, d, o)
		claimed, claimErr := f.Claim(ctx, max)
		return claimed, settleErr, claimErr
	}
}

func TestALoneWorkerSettlesAndClaimsInOneCall(t *testing.T) {
	ids := rowIDs(50)
	f := &settleClaimForm{fakeForm: newFakeForm("jobs", ids...)}
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == len(ids) }); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if got := f.settled[id]; len(got) != 1 || got[0].Kind() != outcome.KindAck {
			t.Fatalf("row %d settled %v, want one ack", id, got)
		}
	}
	// The first row comes from a plain claim; every settlement after it claims the next row.
	if n := f.fused.Load(); n < int32(len(ids))-1 {
		t.Fatalf("%d of %d settlements claimed the next row with them, want all but the last", n, len(ids))
	}
	if len(f.released) != 0 {
		t.Fatalf("rows %v released, want none", f.released)
	}
}

func TestPollWaitsSpreadOverTheIntervalAndNeverExceedIt(t *testing.T) {
	const interval = 100 * time.Millisecond
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), newFakeForm("jobs"), h, &Config{PollInterval: interval})
	least, most := time.Duration(1<<62), time.Duration(0)
	for range 10000 {
		w := c.pollWait()
		least, most = min(least, w), max(most, w)
	}
	if least < interval/2 || most >= interval {
		t.Fatalf("poll waits from %v to %v, want them in [%v, %v)", least, most, interval/2, interval)
	}
	// 10,000 uniform draws all missing a band of 1/50 of the range: (49/50)^10000, never.
	if least > interval/2+time.Millisecond || most < interval-time.Millisecond {
		t.Fatalf("poll waits from %v to %v, want them spread over [%v, %v)", least, most, interval/2, interval)
	}
}

// claimTimesForm records when each claim ran.
type claimTimesForm struct {
	*fakeForm
	timesMu sync.Mutex
	times   []time.Time
}

func (f *claimTimesForm) Claim(ctx context.Context, max int) ([]*Delivery, error) {
	f.timesMu.Lock()
	f.times = append(f.times, time.Now())
	f.timesMu.Unlock()
	return f.fakeForm.Claim(ctx, max)
}

func (f *claimTimesForm) claimTimes() []time.Time {
	f.timesMu.Lock()
	defer f.timesMu.Unlock()
	return slices.Clone(f.times)
}

// TestIdleWorkersDoNotPollTogether: workers that find an empty queue together claim again at
// times spread over the poll interval. With 8 workers and a 100 ms interval, their second claims
// fall in a 50 ms window; that all 8 land within 5 ms of each other by chance is about 8·0.1⁷,
// one run in a million.
func TestIdleWorkersDoNotPollTogether(t *testing.T) {
	const workers = 8
	f := &claimTimesForm{fakeForm: newFakeForm("jobs")}
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{Workers: workers, PollInterval: 100 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return len(f.claimTimes()) >= 2*workers }); err != nil {
		t.Fatal(err)
	}
	times := f.claimTimes()
	spread := func(ts []time.Time) time.Duration { return ts[len(ts)-1].Sub(ts[0]) }
	first, second := spread(times[:workers]), spread(times[workers:2*workers])
	if second < first+5*time.Millisecond {
		t.Fatalf("the idle workers' first claims spread over %v, their second over %v: they polled together", first, second)
	}
}

// TestDetachedContextsOutliveRunAndEndAtTheirLimit: an operation's context survives Run's end,
// keeps its values, is cancelled once the operation outlasts the limit, and the next operation
// gets a live one; an operation that ends in time leaves its context to the next.
func TestDetachedContextsOutliveRunAndEndAtTheirLimit(t *testing.T) {
	type key struct{}
	const limit = 20 * time.Millisecond
	runCtx, stopRun := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	ops := newDetached(runCtx, limit)
	defer ops.stop()
	stopRun()

	quick := ops.begin()
	ops.end()
	time.Sleep(2 * limit)
	if quick.Err() != nil || quick.Value(key{}) != "v" {
		t.Fatalf("an operation that ended in time: its context reads %v, value %v; want live, with Run's values", quick.Err(), quick.Value(key{}))
	}

	slow := ops.begin()
	if slow != quick {
		t.Fatal("the context of an operation that ended in time was not reused")
	}
	select {
	case <-slow.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("an operation outlasting its limit of %v was not cancelled", limit)
	}
	ops.end()

	next := ops.begin()
	defer ops.end()
	if next.Err() != nil || next.Value(key{}) != "v" {
		t.Fatalf("the operation after a timed-out one: its context reads %v, value %v; want a live one", next.Err(), next.Value(key{}))
	}
}
