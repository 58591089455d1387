package inbox

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

type emailArgs struct {
	To string `json:"to"`
}

func (emailArgs) Kind() string { return "email" }

type reportArgs struct {
	Month int `json:"month"`
}

func (reportArgs) Kind() string { return "report" }

func (reportArgs) KindOptions() KindOptions {
	return KindOptions{Queue: "reports", Priority: 7, MaxAttempts: 3, Retry: RetryAtOnce, Timeout: time.Minute}
}

type unlimitedArgs struct{}

func (unlimitedArgs) Kind() string { return "unlimited" }

func (unlimitedArgs) KindOptions() KindOptions { return KindOptions{MaxAttempts: -1} }

type emptyKind struct{}

func (emptyKind) Kind() string { return "" }

func TestJobMessage(t *testing.T) {
	m := Job(reportArgs{Month: 11})
	if m.Kind != "report" || m.Queue != "reports" || m.Priority != 7 || string(m.Payload) != `{"month":11}` || m.err != nil {
		t.Errorf("Job(reportArgs) = %+v; want kind report, queue reports, priority 7, its JSON", m)
	}
	if m := Job(emailArgs{To: "a"}); m.Kind != "email" || m.Queue != "" || m.Priority != 0 {
		t.Errorf("Job(emailArgs) = %+v; want kind email and the message's defaults", m)
	}
	// Arguments that do not encode fail the publish, naming the kind, before any statement.
	bad := Job(badArgs{F: math.Inf(1)})
	_, err := statements(nil, Table{Name: "jobs", ID: "id"}, []Message{Job(emailArgs{}), bad}, false, time.Now())
	if err == nil || !strings.Contains(err.Error(), `kind "bad"`) {
		t.Errorf("publishing unencodable arguments: %v; want an error naming the kind", err)
	}
}

type badArgs struct{ F float64 }

func (badArgs) Kind() string { return "bad" }

func TestHandleRefusesMistakes(t *testing.T) {
	ok := func(context.Context, *Delivery, emailArgs) error { return nil }
	for _, tt := range []struct {
		name string
		do   func(k *Kinds)
		want string
	}{
		{"nil handler", func(k *Kinds) { Handle[emailArgs](k, nil) }, "handler is nil"},
		{"empty kind", func(k *Kinds) { Handle(k, func(context.Context, *Delivery, emptyKind) error { return nil }) }, "Kind is empty"},
		{"twice", func(k *Kinds) { Handle(k, ok); Handle(k, ok) }, "has a handler already"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if s, _ := p.(string); !strings.Contains(s, tt.want) {
					t.Errorf("panic %v; want one saying %q", p, tt.want)
				}
			}()
			tt.do(&Kinds{})
		})
	}
}

func TestKindsRunEachKindByItsHandler(t *testing.T) {
	var k Kinds
	var got []string
	Handle(&k, func(_ context.Context, d *Delivery, a emailArgs) error {
		got = append(got, "email "+a.To)
		return nil
	})
	Handle(&k, func(_ context.Context, d *Delivery, a reportArgs) error {
		return RetryIn(time.Hour, errors.New("later"))
	})
	ctx := context.Background()
	if o := k.Handle(ctx, &Delivery{Kind: "email", Payload: []byte(`{"to":"ada"}`)}); o.Kind() != outcome.KindAck || !slices.Equal(got, []string{"email ada"}) {
		t.Errorf("an email: %v, handled %v; want an Ack from the email handler", o, got)
	}
	if o := k.Handle(ctx, &Delivery{Kind: "report", Payload: []byte(`{"month":1}`)}); o.Kind() != outcome.KindRetryAfter || o.Delay() != time.Hour {
		t.Errorf("a report: %v; want the handler's error as Result reads it (retry after 1h)", o)
	}
	// Arguments that do not decode fail the row at once, with the decode error.
	o := k.Handle(ctx, &Delivery{Kind: "report", Payload: []byte(`{"month":"x"}`)})
	if o.Kind() != outcome.KindFail || !strings.Contains(o.Err().Error(), `kind "report"`) {
		t.Errorf("undecodable arguments: %v (%v); want a Fail naming the kind", o, o.Err())
	}
	// A kind with no handler, which no claim of this consumer takes, is retried.
	if o := k.Handle(ctx, &Delivery{Kind: "other"}); o.Kind() != outcome.KindRetry || !strings.Contains(o.Err().Error(), `"other"`) {
		t.Errorf("an unknown kind: %v; want a Retry naming it", o)
	}
	if names := k.Names(); !slices.Equal(names, []string{"email", "report"}) {
		t.Errorf("Names = %v", names)
	}
}

// bindingForm records the binding it is opened with.
type bindingForm struct {
	*fakeForm
	mu    sync.Mutex
	bound []Binding
}

func (f *bindingForm) Open(ctx context.Context, db *sql.DB, b Binding) (Plan, error) {
	f.mu.Lock()
	f.bound = append(f.bound, b)
	f.mu.Unlock()
	return f.fakeForm.Open(ctx, db, b)
}

func kindsTable() Table {
	return Table{Name: "jobs", ID: "id", Kind: "kind", Attempt: "attempt", RetryAfter: "retry_after", DeadAt: "dead_at"}
}

func TestConsumerClaimsItsKindsEachBelowItsLimit(t *testing.T) {
	var k Kinds
	Handle(&k, func(context.Context, *Delivery, reportArgs) error { return nil })
	Handle(&k, func(context.Context, *Delivery, emailArgs) error { return nil })
	Handle(&k, func(context.Context, *Delivery, unlimitedArgs) error { return nil })
	f := &bindingForm{fakeForm: newFakeForm("jobs")}
	f.plan.Described = kindsTable()
	c := NewConsumer(noDB(0), f, &k, &Config{MaxAttempts: 10})
	if err := runUntil(t, c, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.bound) > 0
	}); err != nil {
		t.Fatal(err)
	}
	want := []ClaimedKind{{"unlimited", 0}, {"report", 3}, {"email", 10}} // by limit, then name
	if len(f.bound) == 0 || !slices.Equal(f.bound[0].Kinds, want) {
		t.Fatalf("bound %+v; want kinds %v", f.bound, want)
	}
}

func TestConsumerOfKindsRefusesATableWithoutKinds(t *testing.T) {
	var k Kinds
	f := newFakeForm("jobs")
	f.plan.Described = kindsTable()
	if err := NewConsumer(noDB(0), f, &k, nil).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no kind is registered") {
		t.Errorf("Run with no kind registered: %v", err)
	}
	Handle(&k, func(context.Context, *Delivery, emailArgs) error { return nil })
	g := newFakeForm("jobs")
	if err := NewConsumer(noDB(0), g, &k, nil).Run(context.Background()); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "Table.Kind") {
		t.Errorf("Run on a table without a Kind column: %v; want ErrSchema naming Table.Kind", err)
	}
}

func TestKindOptionsApplyToTheirRows(t *testing.T) {
	var k Kinds
	Handle(&k, func(context.Context, *Delivery, reportArgs) error { return nil })
	Handle(&k, func(context.Context, *Delivery, emailArgs) error { return nil })
	Handle(&k, func(context.Context, *Delivery, unlimitedArgs) error { return nil })
	c := NewConsumer(noDB(0), newFakeForm("jobs"), &k, &Config{MaxAttempts: 10, Retry: ExponentialBackoff{Base: time.Second, Max: time.Second}})
	c.life = kindsTable().lifecycle()
	boom := errors.New("boom")
	for _, tt := range []struct {
		kind    string
		attempt int
		want    outcome.Kind
		delay   time.Duration
	}{
		{"report", 2, outcome.KindRetryAfter, 0},          // its own policy: at once
		{"report", 3, outcome.KindFail, 0},                // its own limit
		{"email", 3, outcome.KindRetryAfter, time.Second}, // the consumer's (jittered, up to 1 s)
		{"email", 10, outcome.KindFail, 0},
		{"unlimited", 1000, outcome.KindRetryAfter, time.Second}, // no limit
	} {
		o := c.resolve(&Delivery{Kind: tt.kind, Attempt: tt.attempt}, outcome.Retry().WithError(boom))
		if o.Kind() != tt.want || o.Delay() > tt.delay || tt.delay > 0 && o.Delay() == 0 {
			t.Errorf("a %s row at attempt %d that retries settles as %v, want %v %v", tt.kind, tt.attempt, o, tt.want, tt.delay)
		}
	}
}

// A handler's context carries its deadline, is cancelled there with context.DeadlineExceeded,
// and a handler that ignores it is abandoned a grace later: its row settles as a retry naming
// the timeout, and a new worker takes the next rows.
func TestHandlerTimeout(t *testing.T) {
	f := newFakeForm("jobs", 1, 2, 3)
	release := make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	var deadlines []time.Duration
	var errs []error
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		at, ok := ctx.Deadline()
		mu.Lock()
		if ok {
			deadlines = append(deadlines, time.Until(at))
		}
		mu.Unlock()
		switch d.ID {
		case 1: // honours its context
			<-ctx.Done()
			mu.Lock()
			errs = append(errs, ctx.Err())
			mu.Unlock()
			return outcome.Retry().WithError(ctx.Err())
		case 2: // ignores it
			<-release
		}
		return outcome.Ack()
	})
	c := NewConsumer(noDB(0), f, h, &Config{HandlerTimeout: 200 * time.Millisecond, Retry: RetryAtOnce})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 3 }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) != 3 || slices.ContainsFunc(deadlines, func(d time.Duration) bool { return d > 200*time.Millisecond }) {
		t.Errorf("deadlines seen %v; want each handler's context to end within its 200 ms", deadlines)
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("the honouring handler's ctx.Err() = %v; want context.DeadlineExceeded", errs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range []int64{1, 2} {
		os := f.settled[id]
		if len(os) != 1 || os[0].Kind() != outcome.KindRetryAfter || os[0].Delay() != 0 || !errors.Is(os[0].Err(), context.DeadlineExceeded) && !errors.Is(os[0].Err(), errHandlerTimeout) {
			t.Errorf("row %d settled %v; want one retry at once naming the timeout", id, os)
		}
	}
	if os := f.settled[3]; len(os) != 1 || os[0].Kind() != outcome.KindAck {
		t.Errorf("row 3, after the abandoned handler: %v; want an Ack by the worker in its place", os)
	}
}

// A handler may leave its context with a goroutine that outlives it, as database/sql does for a
// transaction begun on it; the next unit of the same worker must not change that context (under
// -race, this test failed while a worker reused one handler context for all its units).
func TestHandlerContextOutlivesItsHandler(t *testing.T) {
	f := newFakeForm("jobs", 1, 2, 3, 4, 5, 6)
	var watchers sync.WaitGroup
	stop := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		at, _ := ctx.Deadline()
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				if got, _ := ctx.Deadline(); !got.Equal(at) || ctx.Err() != nil {
					t.Errorf("row %d: its context changed after its handler returned: deadline %v, want %v; err %v", d.ID, got, at, ctx.Err())
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		return outcome.Ack()
	})
	c := NewConsumer(noDB(0), f, h, &Config{Workers: 1, HandlerTimeout: time.Hour})
	err := runUntil(t, c, func() bool { return f.settledCount() == 6 })
	close(stop)
	watchers.Wait()
	if err != nil {
		t.Fatal(err)
	}
}

// Consumers of disjoint kinds share a queue in one process, as two services sharing a table do;
// a kind registered with two of them, or a consumer of the whole queue beside one of kinds, is
// refused (ErrAlreadyConsuming, naming the kind).
func TestConsumersOfDisjointKindsShareAQueue(t *testing.T) {
	db := noDB(0)
	var emails, reports, both Kinds
	Handle(&emails, func(context.Context, *Delivery, emailArgs) error { return nil })
	Handle(&reports, func(context.Context, *Delivery, reportArgs) error { return nil })
	Handle(&both, func(context.Context, *Delivery, reportArgs) error { return nil })
	Handle(&both, func(context.Context, *Delivery, unlimitedArgs) error { return nil })
	form := func() *fakeForm {
		f := newFakeForm("jobs")
		f.plan.Described = kindsTable()
		return f
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	for _, k := range []*Kinds{&emails, &reports} {
		f := form()
		go func() { errs <- NewConsumer(db, f, k, &Config{Queue: "q"}).Run(ctx) }()
		<-f.opened
	}
	if err := NewConsumer(db, form(), &both, &Config{Queue: "q"}).Run(ctx); !errors.Is(err, ErrAlreadyConsuming) || !strings.Contains(err.Error(), `kind "report"`) {
		t.Errorf("a consumer registering a kind another already runs: %v, want ErrAlreadyConsuming naming the kind", err)
	}
	plain := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	if err := NewConsumer(db, form(), plain, &Config{Queue: "q"}).Run(ctx); !errors.Is(err, ErrAlreadyConsuming) {
		t.Errorf("a consumer of the whole queue beside consumers of kinds: %v, want ErrAlreadyConsuming", err)
	}
	cancel()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a consumer of its own kinds: %v", err)
		}
	}
}
