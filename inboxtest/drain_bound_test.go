package inboxtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// TestDrainTimeoutCancelsTheHandlers: when its timeout passes with a handler in work, Drain
// cancels that handler's context and returns once it has, with the queue not drained. The
// handler returns only when its context ends, and the consumer's shutdown timeout is an hour:
// a Drain that waited for either would not return at all, so returning (within the test's
// guard, a minute, far below both) proves it cancelled the handler itself.
func TestDrainTimeoutCancelsTheHandlers(t *testing.T) {
	f := &memForm{endless: true}
	cancelled := make(chan error, 1)
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		<-ctx.Done()
		select {
		case cancelled <- context.Cause(ctx):
		default:
		}
		return outcome.Retry()
	})
	const timeout = time.Second
	type drained struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan drained, 1)
	go func() {
		start := time.Now()
		_, err := inboxtest.Drain(context.Background(), timeout, func(obs inbox.Observer) *inbox.Consumer {
			return inbox.NewConsumer(noDB(), f, h, &inbox.Config{Observer: obs, ShutdownTimeout: time.Hour})
		})
		done <- drained{err, time.Since(start)}
	}()
	const guard = time.Minute
	select {
	case got := <-done:
		if got.err == nil || !strings.Contains(got.err.Error(), "not drained within 1s") {
			t.Errorf("Drain returned %v, want the queue not drained within its timeout", got.err)
		}
		if got.elapsed < timeout {
			t.Errorf("Drain returned after %v, before its timeout %v", got.elapsed, timeout)
		}
	case <-time.After(guard):
		t.Fatalf("Drain with a 1s timeout has not returned after %v: it waits for a handler it should have cancelled", guard)
	}
	select {
	case cause := <-cancelled:
		if !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
			t.Errorf("the handler's context ended with cause %v", cause)
		}
	default:
		t.Error("Drain returned, and the handler's context never ended")
	}
}
