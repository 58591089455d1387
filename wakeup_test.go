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
