package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// tally is an Observer that counts the rows claimed and handled, and the settlements per
// outcome applied; a settlement that failed is counted apart.
type tally struct {
	mu       sync.Mutex
	claimed  int
	handled  int
	settled  map[outcome.Kind]int
	failed   int
	lost     int // settlements whose context was not the one Handling gave the handler
	badForms map[string]bool
	form     string
}

type tallyKey struct{}

func newTally(form string) *tally {
	return &tally{settled: map[outcome.Kind]int{}, badForms: map[string]bool{}, form: form}
}

func (o *tally) Claimed(_ context.Context, c inbox.Claim) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.claimed += c.Rows
	o.checkForm(c.Form)
}

func (o *tally) Handling(ctx context.Context, u inbox.Unit) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.handled += len(u.Deliveries)
	o.checkForm(u.Form)
	return context.WithValue(ctx, tallyKey{}, u.Deliveries[0].ID)
}

func (o *tally) Settled(ctx context.Context, s inbox.Settlement) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ctx.Value(tallyKey{}) != s.Deliveries[0].ID {
		o.lost++
	}
	if s.Err != nil {
		o.failed += len(s.Deliveries)
		return
	}
	for _, out := range s.Outcomes {
		o.settled[out.Kind()]++
	}
}

func (o *tally) checkForm(form string) {
	if form != o.form {
		o.badForms[form] = true
	}
}

// expected counts what the handler returned, by the outcome the consumer applies for it: a
// panic and a zero outcome as Retry, a row the handler found undecodable as Drop.
type expected struct {
	mu      sync.Mutex
	settled map[outcome.Kind]int
}

// give records the outcome the row with payload p takes on its attempt, and returns what the
// handler returns for it (false: the handler panics instead).
func (e *expected) give(d *inbox.Delivery) (outcome.Outcome, bool) {
	o, kind, ok := outcome.Ack(), outcome.KindAck, true
	if d.Attempt == 1 {
		switch string(d.Payload) {
		case "drop":
			o, kind = outcome.Drop(), outcome.KindDrop
		case "retry":
			o, kind = outcome.Retry(), outcome.KindRetryAfter
		case "zero":
			o, kind = outcome.Outcome{}, outcome.KindRetryAfter
		case "panic":
			kind, ok = outcome.KindRetryAfter, false
		case "undecodable":
			d.Undecodable(errors.New("the test says so"))
			kind = outcome.KindDrop
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settled[kind]++
	return o, ok
}

// TestObserver: on every form × database, single and in batches, the observer is told of as
// many rows claimed as handled, and of each settlement by the outcome the consumer applied for
// what the handler returned, with the context it gave the handler.
func TestObserver(t *testing.T) {
	kinds := []string{"ack", "drop", "retry", "zero", "panic", "undecodable"}
	const each = 5
	var tests []subtest
	for _, c := range cells(t) {
		for _, batch := range []bool{false, true} {
			tests = append(tests, subtest{fmt.Sprintf("%s/batch=%v", c.name(), batch), func(t *testing.T) {
				// A panic retries its whole batch, so only single deliveries panic.
				ks := kinds
				if batch {
					ks = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == "panic" })
				}
				db, tbl := c.b.openTable(t, 8, fullTable)
				var msgs []inbox.Message
				for i := 0; i < each; i++ {
					for _, k := range ks {
						msgs = append(msgs, inbox.Message{Queue: "q", Payload: []byte(k)})
					}
				}
				c.publish(t, db, tbl, msgs...)
				obs := newTally(c.form)
				want := &expected{settled: map[outcome.Kind]int{}}
				cfg := &inbox.Config{Queue: "q", Workers: 2, Observer: obs, PollInterval: cellPoll, Logger: testLogger(t), Retry: inbox.RetryAtOnce}
				var stop func()
				if batch {
					h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
						if ctx.Value(tallyKey{}) == nil {
							t.Error("the batch handler's context is not the observer's")
						}
						outs := make([]outcome.Outcome, len(ds))
						for i, d := range ds {
							outs[i], _ = want.give(d)
						}
						return outs
					})
					stop = startConsumer(t, inbox.NewBatchConsumer(db, c.newForm(t, tbl).(inbox.BatchForm), 4, h, cfg))
				} else {
					h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
						if ctx.Value(tallyKey{}) == nil {
							t.Error("the handler's context is not the observer's")
						}
						o, ok := want.give(d)
						if !ok {
							panic("the test panics")
						}
						return o
					})
					stop = runConsumer(t, db, c.newForm(t, tbl), h, cfg)
				}
				// Every row is delivered once, and the rows whose first attempt retries (retry,
				// zero, panic) once more.
				deliveries := len(msgs)
				for _, k := range ks {
					if k == "retry" || k == "zero" || k == "panic" {
						deliveries += each
					}
				}
				processed := c.q(t, tbl.ProcessedAt) + " IS NOT NULL"
				waitFor(t, time.Minute, "every row to settle", func() bool {
					obs.mu.Lock()
					defer obs.mu.Unlock()
					return obs.handled >= deliveries && len(c.ids(t, db, tbl, processed)) == len(msgs)
				})
				stop()
				obs.mu.Lock()
				defer obs.mu.Unlock()
				want.mu.Lock()
				defer want.mu.Unlock()
				if !maps.Equal(obs.settled, want.settled) || obs.failed != 0 {
					t.Errorf("the observer saw settlements %v (and %d failed), the handler's outcomes map to %v", obs.settled, obs.failed, want.settled)
				}
				if obs.claimed != obs.handled || obs.handled != deliveries {
					t.Errorf("the observer saw %d rows claimed and %d handled, want %d each", obs.claimed, obs.handled, deliveries)
				}
				if obs.lost != 0 || len(obs.badForms) != 0 {
					t.Errorf("%d settlements without Handling's context; forms named %v besides %q", obs.lost, obs.badForms, c.form)
				}
			}})
		}
	}
	runConcurrently(t, 4, tests)
}

// TestObserverTransactionalBatch: in transactional mode a batch whose outcomes are not all Ack
// rolls back and retries its Acks; the observer is told of those Retries, as many as the rows
// were delivered again, on every form × database.
func TestObserverTransactionalBatch(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		db, tbl := c.b.openTable(t, 8, fullTable)
		var msgs []inbox.Message
		for i := range 24 {
			p := "ack"
			if i%4 == 0 {
				p = "drop"
			}
			msgs = append(msgs, inbox.Message{Queue: "q", Payload: []byte(p)})
		}
		c.publish(t, db, tbl, msgs...)
		obs := newTally(c.form)
		var mu sync.Mutex
		deliveries := 0
		h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
			mu.Lock()
			deliveries += len(ds)
			mu.Unlock()
			outs := make([]outcome.Outcome, len(ds))
			for i, d := range ds {
				outs[i] = outcome.Ack()
				if string(d.Payload) == "drop" {
					outs[i] = outcome.Drop()
				}
			}
			return outs
		})
		cfg := &inbox.Config{Queue: "q", Workers: 2, Transactional: true, Observer: obs, PollInterval: cellPoll, Logger: testLogger(t), Retry: inbox.RetryAtOnce}
		stop := startConsumer(t, inbox.NewBatchConsumer(db, c.newForm(t, tbl).(inbox.BatchForm), 4, h, cfg))
		processed := c.q(t, tbl.ProcessedAt) + " IS NOT NULL"
		waitFor(t, time.Minute, "every row to settle", func() bool { return len(c.ids(t, db, tbl, processed)) == len(msgs) })
		stop()
		obs.mu.Lock()
		defer obs.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		settledRows := obs.settled[outcome.KindAck] + obs.settled[outcome.KindDrop]
		if settledRows != len(msgs) || obs.settled[outcome.KindDrop] != 6 || obs.settled[outcome.KindRetry] != deliveries-len(msgs) || obs.failed != 0 {
			t.Errorf("the observer saw %v (%d failed) over %d deliveries of %d rows: want 6 drops, %d acks, and a retry per delivery again", obs.settled, obs.failed, deliveries, len(msgs), len(msgs)-6)
		}
		if obs.settled[outcome.KindRetry] == 0 {
			t.Errorf("no batch mixed an Ack with a Drop (%v): the test shows nothing", obs.settled)
		}
	})
}
