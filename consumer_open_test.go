package inbox

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// lostStatement is a driver's error for a prepared statement the server connection already
// holds, as pgx reports it behind a pooler in transaction mode.
type lostStatement struct{}

func (lostStatement) Error() string {
	return `ERROR: prepared statement "stmtcache_1f" already exists (SQLSTATE 42P05)`
}
func (lostStatement) SQLState() string { return "42P05" }

// TestConsumerEndsOnAPoolersLostStatements: an Open that meets a prepared statement the server
// lost or already held, which a pooler in transaction mode makes happen on every try, ends Run
// at once with ErrDialect naming the pooler, Config.UnpreparedStatements (set or not) and pgx's
// DSN option, rather than trying Open again every poll interval for as long as Run runs.
func TestConsumerEndsOnAPoolersLostStatements(t *testing.T) {
	for _, unprepared := range []bool{false, true} {
		f := newFakeForm("jobs", 1)
		f.openErr = []error{fmt.Errorf("table %q: inbox: reading the Postgres server version: %w", "jobs", lostStatement{})}
		var logs logBuffer
		h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
		c := NewConsumer(noDB(0), f, h, &Config{Logger: logs.logger(), PollInterval: time.Millisecond, UnpreparedStatements: unprepared})
		r := startRun(c)
		var err error
		select {
		case err = <-r.errc:
		case <-f.opened: // Open was tried again, and succeeded
			err = r.stop(t, "Run did not return after its context was cancelled")
			t.Fatalf("unprepared %v: Run tried Open again (and returned %v once stopped):\n%s", unprepared, err, logs.String())
		}
		if !errors.Is(err, ErrDialect) || !errors.As(err, new(lostStatement)) {
			t.Fatalf("unprepared %v: Run: %v, want ErrDialect wrapping the driver's error", unprepared, err)
		}
		msg := err.Error()
		for _, want := range []string{"pooler in transaction mode", "PgBouncer", "inbox.Config.UnpreparedStatements", "default_query_exec_mode=exec"} {
			if n := strings.Count(msg, want); n != 1 {
				t.Errorf("unprepared %v: %q names %q %d times, want once", unprepared, msg, want, n)
			}
		}
		if set := strings.Contains(msg, "UnpreparedStatements is set"); set != unprepared {
			t.Errorf("unprepared %v: %q, want it to say the setting is on only when it is", unprepared, msg)
		}
	}
}

// syncClock is a clock that follows a database's (it has Sync), whose successive Syncs fail
// with errs, then succeed.
type syncClock struct {
	mu    sync.Mutex
	errs  []error
	syncs int
}

func (c *syncClock) Now() time.Time { return time.Now() }

func (c *syncClock) Sync(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncs++
	if len(c.errs) == 0 {
		return nil
	}
	err := c.errs[0]
	c.errs = c.errs[1:]
	return err
}

// TestConsumerSyncsTheClockAgainWhenItsConnectionFails: a database clock whose first sync at
// startup loses its connection is the connection's failure, as an Open's would be: Run closes
// the form, lets the queue go, tries again within a poll interval and then consumes. A sync that
// fails otherwise (a clock without its database) ends Run with its error, the form closed.
func TestConsumerSyncsTheClockAgainWhenItsConnectionFails(t *testing.T) {
	cut := fmt.Errorf("inbox: reading the database's clock (postgres): %w", driver.ErrBadConn)
	f := newFakeForm("jobs", 1)
	clock := &syncClock{errs: []error{cut}}
	var logs logBuffer
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{Logger: logs.logger(), PollInterval: time.Millisecond, Clock: clock})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 1 }); err != nil {
		t.Fatalf("Run: %v, want it to sync again and consume\n%s", err, logs.String())
	}
	if clock.syncs != 2 || f.closed != 2 || !strings.Contains(logs.String(), "opening the consumer failed") {
		t.Errorf("%d syncs, the form closed %d times, want 2 of each (the failed start's and Run's end), and the failure logged:\n%s", clock.syncs, f.closed, logs.String())
	}

	f = newFakeForm("jobs", 1)
	bad := errors.New("inbox: a DatabaseClock needs the database whose clock it follows: set its DB and Dialect")
	c = NewConsumer(noDB(0), f, h, &Config{PollInterval: time.Millisecond, Clock: &syncClock{errs: []error{bad}}})
	if err := c.Run(context.Background()); !errors.Is(err, bad) || f.closed != 1 {
		t.Errorf("Run with a clock that cannot sync: %v, the form closed %d times; want the clock's error, the form closed once", err, f.closed)
	}
}
