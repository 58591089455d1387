package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// recorder is an Observer that keeps what it is told, and puts a value of its own in the
// handler's context.
type recorder struct {
	mu       sync.Mutex
	claimed  int                       // rows the claims reported
	handling map[int64]int             // Handling calls per row
	settled  map[int64]outcome.Outcome // the outcome Settled reported per row
	errs     map[int64]error           // the error Settled reported per row
	lostCtx  int                       // Settled calls whose context was not Handling's
	forms    []string
}

type unitKey struct{}

func newRecorder() *recorder {
	return &recorder{handling: map[int64]int{}, settled: map[int64]outcome.Outcome{}, errs: map[int64]error{}}
}

func (r *recorder) Claimed(_ context.Context, c Claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claimed += c.Rows
}

func (r *recorder) Handling(ctx context.Context, u Unit) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range u.Deliveries {
		r.handling[d.ID]++
	}
	r.forms = append(r.forms, u.Form)
	return context.WithValue(ctx, unitKey{}, fmt.Sprint(ids(u.Deliveries)))
}

func (r *recorder) Settled(ctx context.Context, s Settlement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Value(unitKey{}) != fmt.Sprint(ids(s.Deliveries)) {
		r.lostCtx++
	}
	for i, d := range s.Deliveries {
		r.settled[d.ID] = s.Outcomes[i]
		r.errs[d.ID] = s.Err
	}
}

func (r *recorder) settledCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.settled)
}

// TestObserverSeesTheOutcomesApplied: the observer is told of each row's outcome as the form
// applied it (a panic and a zero outcome as a Retry the retry policy delays, an undecodable row
// by UndecodablePayload),
// once per row, with the context it gave the handler.
func TestObserverSeesTheOutcomesApplied(t *testing.T) {
	f := newFakeForm("jobs", 1, 2, 3, 4, 5)
	f.plan.Form = "fake"
	rec := newRecorder()
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		if ctx.Value(unitKey{}) == nil {
			panic("the handler's context is not the observer's")
		}
		switch d.ID {
		case 1:
			panic("boom")
		case 2:
			return outcome.Outcome{}
		case 3:
			d.Undecodable(errors.New("bad payload"))
			return outcome.Ack()
		case 4:
			return outcome.RetryAfter(time.Minute)
		}
		return outcome.Ack()
	})
	c := NewConsumer(noDB(0), f, h, &Config{Workers: 2, Observer: rec, UndecodablePayload: outcome.Drop(), PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return rec.settledCount() == 5 }); err != nil {
		t.Fatal(err)
	}
	want := map[int64]outcome.Kind{1: outcome.KindRetryAfter, 2: outcome.KindRetryAfter, 3: outcome.KindDrop, 4: outcome.KindRetryAfter, 5: outcome.KindAck}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, kind := range want {
		if got := rec.settled[id]; got.Kind() != kind || f.settled[id][0] != got {
			t.Errorf("row %d: the observer saw %v, the form applied %v; want %v", id, got, f.settled[id], kind)
		}
		if rec.handling[id] != 1 || rec.errs[id] != nil {
			t.Errorf("row %d: %d Handling calls, settlement error %v; want 1 and nil", id, rec.handling[id], rec.errs[id])
		}
	}
	if rec.claimed != 5 || rec.lostCtx != 0 || slices.ContainsFunc(rec.forms, func(s string) bool { return s != "fake" }) {
		t.Errorf("claims reported %d rows, %d settlements came without Handling's context, forms %v; want 5, 0, fake", rec.claimed, rec.lostCtx, rec.forms)
	}
}

// TestObserverSeesTheOutcomesATransactionalBatchApplies: a transactional batch whose outcomes
// are not all Ack settles its Acks as Retry, and the observer is told so.
func TestObserverSeesTheOutcomesATransactionalBatchApplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		give []outcome.Outcome
		want []outcome.Kind
	}{
		{"all ack", []outcome.Outcome{outcome.Ack(), outcome.Ack()}, []outcome.Kind{outcome.KindAck, outcome.KindAck}},
		{"one drop", []outcome.Outcome{outcome.Ack(), outcome.Drop()}, []outcome.Kind{outcome.KindRetry, outcome.KindDrop}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBatchForm{fakeForm: newFakeForm("jobs", 1, 2)}
			rec := newRecorder()
			h := BatchHandlerFunc(func(ctx context.Context, ds []*Delivery) []outcome.Outcome { return tc.give[:len(ds)] })
			c := NewBatchConsumer(noDB(0), f, 2, h, &Config{Transactional: true, Observer: rec, PollInterval: 10 * time.Millisecond})
			if err := runUntil(t, c, func() bool { return rec.settledCount() == 2 }); err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(f.batches) != 1 {
				t.Fatalf("batches %v, want one of both rows", f.batches)
			}
			for i, id := range []int64{1, 2} {
				if got := rec.settled[id].Kind(); got != tc.want[i] {
					t.Errorf("row %d: the observer saw %v, want %v", id, got, tc.want[i])
				}
			}
		})
	}
}

// TestObserverIsToldOfAnAbandonedUnit: a handler that outlives the shutdown timeout has its
// row given back, and once it returns the observer is told, with ErrClosed.
func TestObserverIsToldOfAnAbandonedUnit(t *testing.T) {
	f := newFakeForm("jobs", 1)
	rec := newRecorder()
	started, leave := make(chan struct{}), make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		close(started)
		<-leave
		return outcome.Ack()
	})
	c := NewConsumer(noDB(0), f, h, &Config{Observer: rec, ShutdownTimeout: 10 * time.Millisecond})
	r := startRun(c)
	<-started
	if err := r.stop(t, "Run did not return after the shutdown timeout"); err != nil {
		t.Fatal(err)
	}
	close(leave)
	for rec.settledCount() == 0 {
		time.Sleep(time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !errors.Is(rec.errs[1], ErrClosed) || len(f.settled) != 0 {
		t.Fatalf("observer told %v, form settled %v; want ErrClosed and nothing settled", rec.errs[1], f.settled)
	}
}
