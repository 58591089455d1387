package inboxtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// oneRowForm is a form whose queue holds one delivery: it records the outcome the consumer
// settles it by.
type oneRowForm struct {
	table inbox.Table
	mu    sync.Mutex
	row   *inbox.Delivery
	got   chan outcome.Outcome
}

func (f *oneRowForm) Open(context.Context, *sql.DB, inbox.Binding) (inbox.Plan, error) {
	return inbox.Plan{Table: f.table.Name, Form: "one_row", Described: f.table}, nil
}

func (f *oneRowForm) Claim(context.Context, int) ([]*inbox.Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.row == nil {
		return nil, nil
	}
	d := f.row
	f.row = nil
	return []*inbox.Delivery{d}, nil
}

func (f *oneRowForm) Settle(_ context.Context, _ *inbox.Delivery, o outcome.Outcome) error {
	f.got <- o
	return nil
}

func (f *oneRowForm) Extend(context.Context, *inbox.Delivery) error  { return nil }
func (f *oneRowForm) Release(context.Context, *inbox.Delivery) error { return nil }
func (f *oneRowForm) Close() error                                   { return nil }

// consumerApplies runs a consumer of t configured by cfg with handler h on d, the one row of
// its queue, and returns the outcome it settles the row by.
func consumerApplies(t *testing.T, tbl inbox.Table, cfg inbox.Config, h inbox.Handler, d *inbox.Delivery) outcome.Outcome {
	t.Helper()
	f := &oneRowForm{table: tbl, row: d, got: make(chan outcome.Outcome, 1)}
	cfg.PollInterval = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- inbox.NewConsumer(noDB(), f, h, &cfg).Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case o := <-f.got:
		return o
	case err := <-errc:
		errc <- err
		t.Fatalf("Run returned %v before the row was settled", err)
	}
	return outcome.Outcome{}
}

// sameOutcome reports whether a and b are the same outcome: kind, delay and reason.
func sameOutcome(a, b outcome.Outcome) bool {
	if a.Kind() != b.Kind() || a.Delay() != b.Delay() || (a.Err() == nil) != (b.Err() == nil) {
		return false
	}
	return a.Err() == nil || a.Err().Error() == b.Err().Error()
}

// minutes is a retry policy that delays attempt n by n minutes: a delay a test can compare.
type minutes struct{}

func (minutes) Delay(attempt int) time.Duration { return time.Duration(attempt) * time.Minute }

var errCustomer = errors.New("customer not found")

// returning is a handler of invoices that returns o, panics where panics is set, and acks
// otherwise; a payload that is not an invoice does not decode.
func returning(o outcome.Outcome, panics bool) inbox.Handler {
	return inbox.JSON(func(ctx context.Context, d *inbox.Delivery, inv invoice) outcome.Outcome {
		if panics {
			panic("the handler's bug")
		}
		return o
	})
}

// TestHandleAgreesWithTheConsumer: for every outcome a handler gives (and a panic, and a payload
// that does not decode), at attempts below, at and past the limit, under the retry policies and
// on tables with and without each column of the failure lifecycle, inboxtest reports the outcome
// a consumer with the same table and Config settles the row by: kind, delay and reason.
func TestHandleAgreesWithTheConsumer(t *testing.T) {
	full := inbox.Table{Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after", DeadAt: "dead_at", LastError: "last_error"}
	noDeadAt, noAttempt, noRetryAfter := full, full, full
	noDeadAt.DeadAt, noDeadAt.LastError = "", ""
	noAttempt.Attempt = ""
	noRetryAfter.RetryAfter = ""
	handlers := []struct {
		name string
		h    inbox.Handler
		bad  bool // the payload does not decode
	}{
		{"ack", returning(outcome.Ack(), false), false},
		{"drop", returning(outcome.Drop().WithError(errCustomer), false), false},
		{"retry", returning(outcome.Retry(), false), false},
		{"retry with a reason", returning(outcome.Retry().WithError(errCustomer), false), false},
		{"zero outcome", returning(outcome.Outcome{}, false), false},
		{"retry after", returning(outcome.RetryAfter(5*time.Minute), false), false},
		{"fail", returning(outcome.Fail(errCustomer), false), false},
		{"panic", returning(outcome.Ack(), true), false},
		{"undecodable", returning(outcome.Ack(), false), true},
		{"func error", inbox.JSONFunc(func(context.Context, *inbox.Delivery, invoice) error { return errCustomer }), false},
	}
	consumers := []struct {
		name  string
		table inbox.Table
		cfg   inbox.Config
	}{
		{"default policy", full, inbox.Config{}},
		{"minutes, limit 3", full, inbox.Config{Retry: minutes{}, MaxAttempts: 3}},
		{"no limit", full, inbox.Config{Retry: minutes{}, MaxAttempts: -1}},
		{"no dead_at", noDeadAt, inbox.Config{Retry: minutes{}, MaxAttempts: 3}},
		{"no attempt", noAttempt, inbox.Config{Retry: minutes{}, MaxAttempts: 3}},
		{"no retry_after, at once", noRetryAfter, inbox.Config{Retry: inbox.RetryAtOnce, MaxAttempts: 3}},
		{"undecodable fails", full, inbox.Config{Retry: minutes{}, UndecodablePayload: outcome.Fail(nil)}},
		{"undecodable retries", full, inbox.Config{Retry: minutes{}, MaxAttempts: 3, UndecodablePayload: outcome.Retry()}},
	}
	ctx := context.Background()
	for _, c := range consumers {
		for _, h := range handlers {
			for _, attempt := range []int{1, 2, 3, 24, 25, 26} {
				delivery := func() *inbox.Delivery {
					if h.bad {
						return inboxtest.Delivery([]byte("{not json"), attempt)
					}
					return inboxtest.JSONDelivery(invoice{7}, attempt)
				}
				t.Run(fmt.Sprintf("%s/%s/attempt %d", c.name, h.name, attempt), func(t *testing.T) {
					want := consumerApplies(t, c.table, c.cfg, h.h, delivery())
					got := inboxtest.Consumer{Table: c.table, Config: &c.cfg}.Handle(ctx, h.h, delivery()).Outcome
					if c.cfg.Retry == nil && want.Kind() == outcome.KindRetryAfter && got.Kind() == outcome.KindRetryAfter {
						// The default policy's delay is drawn at random: compare all but the delay.
						want, got = outcome.RetryAfter(0).WithError(want.Err()), outcome.RetryAfter(0).WithError(got.Err())
					}
					if !sameOutcome(got, want) {
						t.Errorf("inboxtest reports %v (reason %v), the consumer settles by %v (reason %v)", got, got.Err(), want, want.Err())
					}
				})
			}
		}
	}
}

// oneBatchForm is a batch form whose queue holds one batch.
type oneBatchForm struct {
	oneRowForm
	batch []*inbox.Delivery
}

func (f *oneBatchForm) ClaimBatch(context.Context, int) ([]*inbox.Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.batch
	f.batch = nil
	return b, nil
}

func (f *oneBatchForm) SettleBatch(context.Context, []*inbox.Delivery, []outcome.Outcome) error {
	return nil
}
func (f *oneBatchForm) ReleaseBatch(context.Context, []*inbox.Delivery) error { return nil }

// settledBy is an observer that hands on the outcomes of the first settlement it sees: what
// the consumer applied, a transactional batch's Acks turned into retries among them.
type settledBy chan []outcome.Outcome

func (settledBy) Claimed(context.Context, inbox.Claim) {}
func (settledBy) Handling(ctx context.Context, _ inbox.Unit) context.Context {
	return ctx
}
func (s settledBy) Settled(_ context.Context, st inbox.Settlement) {
	select {
	case s <- append([]outcome.Outcome(nil), st.Outcomes...):
	default:
	}
}

// TestHandleBatchAgreesWithTheConsumer: for batches whose rows end each way (and a panic, a
// short slice of outcomes, a row that does not decode), in and out of transactional mode,
// inboxtest reports for each row the outcome a batch consumer with the same table and Config
// applies to it.
func TestHandleBatchAgreesWithTheConsumer(t *testing.T) {
	tbl := inbox.Table{Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after", DeadAt: "dead_at"}
	batch := func() []*inbox.Delivery {
		ds := []*inbox.Delivery{
			inboxtest.JSONDelivery(invoice{1}, 1), inboxtest.JSONDelivery(invoice{2}, 3),
			inboxtest.Delivery([]byte("{not json"), 1), inboxtest.JSONDelivery(invoice{3}, 2), inboxtest.JSONDelivery(invoice{4}, 1),
		}
		for i, d := range ds {
			d.ID = int64(i + 1)
		}
		return ds
	}
	handlers := []struct {
		name string
		h    inbox.BatchHandler
	}{
		{"mixed", inbox.JSONBatch(func(_ context.Context, ds []*inbox.Delivery, _ []invoice) []outcome.Outcome {
			return []outcome.Outcome{outcome.Ack(), outcome.Retry().WithError(errCustomer), outcome.Fail(errCustomer)} // the last row: none
		})},
		{"all ack", inbox.JSONBatch(func(_ context.Context, ds []*inbox.Delivery, _ []invoice) []outcome.Outcome {
			outs := make([]outcome.Outcome, len(ds))
			for i := range outs {
				outs[i] = outcome.Ack()
			}
			return outs
		})},
		{"panic", inbox.JSONBatch(func(context.Context, []*inbox.Delivery, []invoice) []outcome.Outcome { panic("the batch's bug") })},
	}
	ctx := context.Background()
	for _, transactional := range []bool{false, true} {
		cfg := inbox.Config{Retry: minutes{}, MaxAttempts: 3, Transactional: transactional}
		for _, h := range handlers {
			t.Run(fmt.Sprintf("%s/transactional %v", h.name, transactional), func(t *testing.T) {
				f := &oneBatchForm{oneRowForm: oneRowForm{table: tbl}, batch: batch()}
				seen := make(settledBy, 1)
				c := cfg
				c.Observer, c.PollInterval = seen, 10*time.Millisecond
				runCtx, cancel := context.WithCancel(ctx)
				errc := make(chan error, 1)
				go func() { errc <- inbox.NewBatchConsumer(noDB(), f, 8, h.h, &c).Run(runCtx) }()
				var want []outcome.Outcome
				select {
				case want = <-seen:
				case err := <-errc:
					t.Fatalf("Run returned %v before the batch was settled", err)
				}
				cancel()
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				got := inboxtest.Consumer{Table: tbl, Config: &cfg}.HandleBatch(ctx, h.h, batch())
				for i := range want {
					if !sameOutcome(got[i].Outcome, want[i]) {
						t.Errorf("row %d: inboxtest reports %v (reason %v), the consumer applies %v (reason %v)", i+1, got[i].Outcome, got[i].Outcome.Err(), want[i], want[i].Err())
					}
				}
			})
		}
	}
}
