package inbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// fakeBatchForm claims batches from a fakeForm's rows and records each batch's settlement.
type fakeBatchForm struct {
	*fakeForm
	batches       [][]int64 // ids of each batch claimed
	batchSettles  int
	batchReleases [][]int64
}

func (f *fakeBatchForm) ClaimBatch(ctx context.Context, max int) ([]*Delivery, error) {
	ds, err := f.fakeForm.Claim(ctx, max)
	if len(ds) > 0 {
		f.mu.Lock()
		f.batches = append(f.batches, ids(ds))
		f.mu.Unlock()
	}
	return ds, err
}

func (f *fakeBatchForm) SettleBatch(ctx context.Context, ds []*Delivery, os []outcome.Outcome) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ds) != len(os) {
		panic("SettleBatch: an outcome per delivery")
	}
	f.batchSettles++
	for i, d := range ds {
		f.settled[d.ID] = append(f.settled[d.ID], os[i])
	}
	return nil
}

func (f *fakeBatchForm) ReleaseBatch(ctx context.Context, ds []*Delivery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batchReleases = append(f.batchReleases, ids(ds))
	return nil
}

func (f *fakeBatchForm) Settle(context.Context, *Delivery, outcome.Outcome) error {
	panic("a batch consumer settled a single delivery")
}

func TestBatchConsumerSettlesEachRowByItsOwnOutcome(t *testing.T) {
	ids := rowIDs(100)
	f := &fakeBatchForm{fakeForm: newFakeForm("jobs", ids...)}
	var mu sync.Mutex
	var sizes []int
	h := BatchHandlerFunc(func(ctx context.Context, ds []*Delivery) []outcome.Outcome {
		mu.Lock()
		sizes = append(sizes, len(ds))
		mu.Unlock()
		outs := make([]outcome.Outcome, 0, len(ds))
		for _, d := range ds {
			switch d.ID % 4 {
			case 0:
				outs = append(outs, outcome.Drop())
			case 1:
				outs = append(outs, outcome.RetryAfter(time.Minute))
			case 2:
				outs = append(outs, outcome.Ack())
			case 3:
				return outs // a short slice: the rest are retried
			}
		}
		return outs
	})
	var logs logBuffer
	c := NewBatchConsumer(noDB(0), f, 16, h, &Config{Workers: 3, PollInterval: 10 * time.Millisecond, Logger: logs.logger()})
	if err := runUntil(t, c, func() bool { return f.settledCount() == len(ids) }); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.batches {
		if len(b) > 16 {
			t.Fatalf("a batch of %d rows, above the size 16", len(b))
		}
	}
	if f.batchSettles != len(f.batches) {
		t.Fatalf("%d batches claimed, %d batch settlements: want one each", len(f.batches), f.batchSettles)
	}
	for _, b := range f.batches {
		short := false // once the handler stopped returning outcomes in this batch
		for _, id := range b {
			got := f.settled[id]
			if len(got) != 1 {
				t.Fatalf("row %d settled %v, want once", id, got)
			}
			// A retry, and a missing outcome, retry by the default policy: after a delay.
			want := map[int64]outcome.Kind{0: outcome.KindDrop, 1: outcome.KindRetryAfter, 2: outcome.KindAck, 3: outcome.KindRetryAfter}[id%4]
			if short || id%4 == 3 {
				short, want = true, outcome.KindRetryAfter
			}
			if got[0].Kind() != want {
				t.Fatalf("row %d (batch %v) settled %v, want %v", id, b, got[0], want)
			}
		}
	}
	if !strings.Contains(logs.String(), "no outcome") {
		t.Fatalf("the rows a short slice left out were not logged:\n%s", logs.String())
	}
}

func TestBatchConsumerKeepsUndecodableRowsFromTheHandler(t *testing.T) {
	type order struct{ N int }
	f := &fakeBatchForm{fakeForm: newFakeForm("jobs", 1, 2, 3)}
	bad := &badBatchForm{fakeBatchForm: f, bad: map[int64]bool{2: true}}
	var got []int
	h := JSONBatch(func(ctx context.Context, ds []*Delivery, vs []order) []outcome.Outcome {
		outs := make([]outcome.Outcome, len(ds))
		for i := range ds {
			got = append(got, vs[i].N)
			outs[i] = outcome.Ack()
		}
		return outs
	})
	c := NewBatchConsumer(noDB(0), bad, 8, h, &Config{UndecodablePayload: outcome.RetryAfter(time.Hour), PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 3 }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("the handler decoded %v, want the good rows' values [1 3]", got)
	}
	for id, want := range map[int64]outcome.Kind{1: outcome.KindAck, 2: outcome.KindRetryAfter, 3: outcome.KindAck} {
		if s := f.settled[id]; len(s) != 1 || s[0].Kind() != want {
			t.Fatalf("row %d settled %v, want %v", id, s, want)
		}
	}
}

// badBatchForm gives the rows in bad a payload that is not JSON, and the others their id as N.
type badBatchForm struct {
	*fakeBatchForm
	bad map[int64]bool
}

func (b *badBatchForm) ClaimBatch(ctx context.Context, max int) ([]*Delivery, error) {
	ds, err := b.fakeBatchForm.ClaimBatch(ctx, max)
	for _, d := range ds {
		d.Payload = []byte(`{"N":` + string(rune('0'+d.ID)) + `}`)
		if b.bad[d.ID] {
			d.Payload = []byte("{not json")
		}
	}
	return ds, err
}

func TestBatchConsumerRetriesEveryRowOfAPanickedBatch(t *testing.T) {
	f := &fakeBatchForm{fakeForm: newFakeForm("jobs", 1, 2, 3)}
	h := BatchHandlerFunc(func(ctx context.Context, ds []*Delivery) []outcome.Outcome { panic("boom") })
	c := NewBatchConsumer(noDB(0), f, 16, h, &Config{PollInterval: 10 * time.Millisecond})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 3 }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2, 3} {
		if s := f.settled[id]; len(s) != 1 || s[0].Kind() != outcome.KindRetryAfter || s[0].Delay() <= 0 || !strings.Contains(fmt.Sprint(s[0].Err()), "boom") {
			t.Fatalf("row %d settled %v, want one retry after the policy's delay, the panic its reason", id, s)
		}
	}
}

func TestBatchConsumerGivesAnAbandonedBatchBackWhole(t *testing.T) {
	f := &fakeBatchForm{fakeForm: newFakeForm("jobs", 1, 2, 3)}
	f.plan.ExtendEvery = 5 * time.Millisecond
	started := make(chan struct{})
	h := BatchHandlerFunc(func(ctx context.Context, ds []*Delivery) []outcome.Outcome {
		close(started)
		select {} // never returns, whatever its context says
	})
	c := NewBatchConsumer(noDB(0), f, 16, h, &Config{ShutdownTimeout: 100 * time.Millisecond})
	r := startRun(c)
	<-started
	time.Sleep(30 * time.Millisecond) // a few extensions
	if err := r.stop(t, "Run did not return after the shutdown timeout"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.settled) != 0 || len(f.batchReleases) != 1 || len(f.batchReleases[0]) != 3 {
		t.Fatalf("settled %v, released %v: want the batch of 3 released whole and nothing settled", f.settled, f.batchReleases)
	}
	if f.extended[1] == 0 || f.extended[2] != 0 {
		t.Fatalf("extensions by row %v: want the batch extended through its first delivery only", f.extended)
	}
}

func TestBatchConsumerLogsOutcomesBeyondTheBatch(t *testing.T) {
	f := &fakeBatchForm{fakeForm: newFakeForm("jobs", 1)}
	h := BatchHandlerFunc(func(ctx context.Context, ds []*Delivery) []outcome.Outcome {
		return []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Retry()}
	})
	var logs logBuffer
	c := NewBatchConsumer(noDB(0), f, 16, h, &Config{PollInterval: 10 * time.Millisecond, Logger: logs.logger()})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 1 }); err != nil {
		t.Fatal(err)
	}
	if s := f.settled[1]; len(s) != 1 || s[0].Kind() != outcome.KindAck {
		t.Fatalf("row 1 settled %v, want its own outcome, ack", s)
	}
	if !strings.Contains(logs.String(), "more outcomes than rows") {
		t.Fatalf("the extra outcomes were not logged:\n%s", logs.String())
	}
}
