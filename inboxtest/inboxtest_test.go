package inboxtest_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

type invoice struct{ Number int }

// issue is the handler under test: it acks invoices, retries number 0 later, and panics on
// a negative number.
var issue = inbox.JSON(func(ctx context.Context, d *inbox.Delivery, inv invoice) outcome.Outcome {
	switch {
	case inv.Number < 0:
		panic("negative invoice number")
	case inv.Number == 0:
		return outcome.RetryAfter(time.Minute)
	case inv.Number == 99:
		return outcome.Outcome{}
	}
	return outcome.Ack()
})

// invoices is the consumer the tests' handlers run under: the default Config, on a table whose
// retries wait (RetryAfter).
var invoices = inboxtest.Consumer{Table: inbox.Table{Name: "invoices", ID: "id", Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after"}}

func TestHandleSaysWhatTheConsumerSettlesBy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		d        *inbox.Delivery
		want     outcome.Kind
		returned outcome.Kind
		panics   bool
		decodes  bool
	}{
		{"ack", inboxtest.JSONDelivery(invoice{7}, 1), outcome.KindAck, outcome.KindAck, false, true},
		{"retry after", inboxtest.JSONDelivery(invoice{0}, 1), outcome.KindRetryAfter, outcome.KindRetryAfter, false, true},
		{"zero outcome", inboxtest.JSONDelivery(invoice{99}, 1), outcome.KindRetryAfter, outcome.KindNone, false, true},
		{"panic", inboxtest.JSONDelivery(invoice{-1}, 1), outcome.KindRetryAfter, outcome.KindNone, true, true},
		{"undecodable", inboxtest.Delivery([]byte("{not json"), 1), outcome.KindDrop, outcome.KindNone, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invoices.Handle(ctx, issue, tc.d)
			if r.Outcome.Kind() != tc.want || r.Returned.Kind() != tc.returned || (r.Panic != nil) != tc.panics || (r.DecodeErr == nil) != tc.decodes {
				t.Fatalf("got %+v; want outcome %v, returned %v, panic %v, decodes %v", r, tc.want, tc.returned, tc.panics, tc.decodes)
			}
		})
	}
}

func TestHandleBatchSaysWhatBecomesOfEachRow(t *testing.T) {
	ctx := context.Background()
	h := inbox.JSONBatch(func(ctx context.Context, ds []*inbox.Delivery, vs []invoice) []outcome.Outcome {
		outs := make([]outcome.Outcome, len(ds))
		for i, v := range vs {
			if v.Number < 0 {
				panic("negative invoice number")
			}
			if v.Number > 0 {
				outs[i] = outcome.Ack()
			}
		}
		return outs
	})
	rs := invoices.HandleBatch(ctx, h, []*inbox.Delivery{inboxtest.JSONDelivery(invoice{1}, 1), inboxtest.Delivery([]byte("x"), 1), inboxtest.JSONDelivery(invoice{0}, 2)})
	if rs[0].Outcome.Kind() != outcome.KindAck || rs[1].Outcome.Kind() != outcome.KindDrop || rs[1].DecodeErr == nil || rs[2].Outcome.Kind() != outcome.KindRetryAfter {
		t.Fatalf("results %+v: want ack, drop (undecodable), retry after (no outcome)", rs)
	}
	rs = invoices.HandleBatch(ctx, h, []*inbox.Delivery{inboxtest.JSONDelivery(invoice{1}, 1), inboxtest.JSONDelivery(invoice{-1}, 1)})
	for i, r := range rs {
		if r.Outcome.Kind() != outcome.KindRetryAfter || r.Panic == nil {
			t.Errorf("row %d of a batch that panicked: %+v, want a retry with the panic", i, r)
		}
	}
}

// memForm is a form over rows in memory: a retried row goes back to the end of the queue.
type memForm struct {
	mu      sync.Mutex
	rows    []*inbox.Delivery
	endless bool // every claim finds a row
}

func (f *memForm) Open(context.Context, *sql.DB, inbox.Binding) (inbox.Plan, error) {
	return inbox.Plan{Table: "mem", Form: "mem", Described: inbox.Table{Name: "mem", ID: "id", RetryAfter: "retry_after"}}, nil
}

func (f *memForm) Claim(_ context.Context, max int) ([]*inbox.Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.endless {
		return []*inbox.Delivery{inboxtest.JSONDelivery(invoice{0}, 1)}, nil
	}
	n := min(max, len(f.rows))
	ds := f.rows[:n:n]
	f.rows = f.rows[n:]
	return ds, nil
}

func (f *memForm) Settle(_ context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	if !o.Settles() && !f.endless {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.rows = append(f.rows, &inbox.Delivery{ID: d.ID, Payload: d.Payload, Attempt: d.Attempt + 1})
	}
	return nil
}

func (f *memForm) Extend(context.Context, *inbox.Delivery) error { return nil }
func (f *memForm) Release(ctx context.Context, d *inbox.Delivery) error {
	return f.Settle(ctx, d, outcome.Retry())
}
func (f *memForm) Close() error { return nil }

// noDB is a pool that never connects: the in-memory form needs no database, and the consumer
// reads only the pool's settings.
func noDB() *sql.DB { return sql.OpenDB(noConnector{}) }

type noConnector struct{}

func (noConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("inboxtest: no database in this test")
}

func (noConnector) Driver() driver.Driver { return nil }

func TestDrainRunsTheConsumerUntilNoRowIsDue(t *testing.T) {
	f := &memForm{}
	for i, n := range []int{1, 2, 3} {
		f.rows = append(f.rows, inboxtest.JSONDelivery(invoice{n}, 1))
		f.rows[i].ID = int64(i + 1)
	}
	var attempts sync.Map
	h := inbox.JSON(func(ctx context.Context, d *inbox.Delivery, inv invoice) outcome.Outcome {
		attempts.Store(d.ID, d.Attempt)
		if inv.Number == 2 && d.Attempt == 1 {
			return outcome.Retry()
		}
		return outcome.Ack()
	})
	got, err := inboxtest.Drain(context.Background(), 10*time.Second, func(obs inbox.Observer) *inbox.Consumer {
		return inbox.NewConsumer(noDB(), f, h, &inbox.Config{Workers: 2, Observer: obs, PollInterval: 10 * time.Millisecond, Retry: inbox.RetryAtOnce})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The Retry is settled as the retry policy's RetryAfter (at once: RetryAtOnce).
	if got.Settled[outcome.KindAck] != 3 || got.Settled[outcome.KindRetryAfter] != 1 || got.Failed != 0 {
		t.Fatalf("drained %+v, want 3 acks and 1 retry after", got)
	}
	if a, _ := attempts.Load(int64(2)); a != 2 {
		t.Fatalf("row 2 last handled at attempt %v, want 2", a)
	}
}

func TestDrainFailsWhenTheQueueDoesNotEmptyInTime(t *testing.T) {
	f := &memForm{endless: true}
	_, err := inboxtest.Drain(context.Background(), 50*time.Millisecond, func(obs inbox.Observer) *inbox.Consumer {
		return inbox.NewConsumer(noDB(), f, issue, &inbox.Config{Observer: obs})
	})
	if err == nil || !strings.Contains(err.Error(), "not drained within 50ms") {
		t.Fatalf("Drain of an endless queue returned %v, want it not drained in time", err)
	}
}

func TestDrainFailsWhenRunFails(t *testing.T) {
	f := &memForm{}
	db := noDB()
	db.SetMaxOpenConns(1) // a pool that leaves the application nothing: Run refuses it
	_, err := inboxtest.Drain(context.Background(), 10*time.Second, func(obs inbox.Observer) *inbox.Consumer {
		return inbox.NewConsumer(db, f, issue, &inbox.Config{Observer: obs})
	})
	if err == nil || !strings.Contains(err.Error(), "stopped before its queue was drained") || errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with a consumer whose Run fails returned %v", err)
	}
}

func TestLogKeepsWhatItsLoggersWrite(t *testing.T) {
	var l inboxtest.Log
	warn := l.Logger(slog.LevelWarn)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			warn.Info("below the level")
			warn.Warn("kept", "writer", i)
		}()
	}
	wg.Wait()
	if got := l.Lines(); got != 8 {
		t.Errorf("lines: %d, want 8 (one per Warn, none for Info):\n%s", got, l.String())
	}
	if !l.Contains("writer=7") || l.Contains("below the level") {
		t.Errorf("log:\n%s\nwant every Warn and no Info", l.String())
	}
}
