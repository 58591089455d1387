package inbox

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// wakeOnce is a Waker that wakes its consumer once, when now is closed.
type wakeOnce struct{ now chan struct{} }

func (w wakeOnce) Watch(ctx context.Context, _ string, _ *slog.Logger, wake func()) {
	select {
	case <-w.now:
		wake()
	case <-ctx.Done():
	}
	<-ctx.Done()
}

// TestAWakerWakesIdleWorkers: a row that lands without a publish in this process, once the
// consumer's claim found nothing, is claimed when its Waker wakes it, not at the next poll (an
// hour away).
func TestAWakerWakesIdleWorkers(t *testing.T) {
	f := newFakeForm("woken")
	w := wakeOnce{now: make(chan struct{})}
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{PollInterval: time.Hour, Wakeups: w})
	woke := false
	if err := runUntil(t, c, func() bool {
		f.mu.Lock()
		claimed := f.claims > 0
		f.mu.Unlock()
		if claimed && !woke {
			woke = true
			f.push(1)
			close(w.now)
		}
		return f.settledCount() == 1
	}); err != nil {
		t.Fatal(err)
	}
}

// heldWaker is a Waker that hands its wake func out through ready and wakes nothing itself.
type heldWaker struct{ ready chan func() }

func (w heldWaker) Watch(ctx context.Context, _ string, _ *slog.Logger, wake func()) {
	w.ready <- wake
	<-ctx.Done()
}

// wakeDuringClaimForm is a fake form whose first claim finds nothing while a row lands and the
// consumer is woken, before that claim returns: a publish the claim did not see.
type wakeDuringClaimForm struct {
	*fakeForm
	ready  chan func()
	waited bool
}

func (f *wakeDuringClaimForm) Claim(ctx context.Context, max int) ([]*Delivery, error) {
	ds, err := f.fakeForm.Claim(ctx, max)
	if !f.waited {
		f.waited = true
		wake := <-f.ready
		f.push(1)
		wake()
	}
	return ds, err
}

// TestAWakeDuringAnEmptyClaimIsNotLost: a row that lands, and a wake-up that arrives, while the
// claim that missed it runs, is claimed at once, not at the next poll (an hour away).
func TestAWakeDuringAnEmptyClaimIsNotLost(t *testing.T) {
	ready := make(chan func(), 1)
	f := &wakeDuringClaimForm{fakeForm: newFakeForm("wake_during_claim"), ready: ready}
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{PollInterval: time.Hour, Wakeups: heldWaker{ready: ready}})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 1 }); err != nil {
		t.Fatal(err)
	}
}
