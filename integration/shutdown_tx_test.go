package integration

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"testing"
	"time"

	sqlite "github.com/glebarez/go-sqlite"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// SQLite has no sleep function: the tests' connections get one, inbox_sleep(seconds).
func init() {
	sqlite.MustRegisterScalarFunction("inbox_sleep", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		seconds, ok := args[0].(int64)
		if !ok {
			return nil, fmt.Errorf("inbox_sleep(%v): want whole seconds", args[0])
		}
		time.Sleep(time.Duration(seconds) * time.Second)
		return nil, nil
	})
}

// TestShutdownTimeoutBoundsRunInTransactionalMode: a transactional handler inside a long
// statement on Delivery.Tx, run with a context of its own rather than the handler's (so that
// nothing the consumer cancels stops it), does not keep Run past its shutdown timeout: Run
// returns within the timeout and a small bound, long before the statement ends. The abandoned
// row returns by its form's rule (the row lock form's when its transaction ends, after the
// statement; the lease form's at once, its lease cleared; the advisory form's once the
// statement is done and the lock released), and once the statement is done its connection is
// back: nothing is left behind for good.
func TestShutdownTimeoutBoundsRunInTransactionalMode(t *testing.T) {
	forEachCell(t, shutdownHeldTx)
}

// shutdownStatement is the cell's statement that runs for shutdownStatementFor.
func shutdownStatement(c cell) string {
	switch c.b.name {
	case "postgres":
		return "SELECT pg_sleep(12)"
	case "sqlite":
		return "SELECT inbox_sleep(12)"
	}
	return "SELECT SLEEP(12)"
}

const shutdownStatementFor = 12 * time.Second

func shutdownHeldTx(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	c.publish(t, db, tbl, inbox.Message{Queue: "q"})

	started := make(chan time.Time, 1)
	ended := make(chan time.Time, 1)
	var once sync.Once
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		once.Do(func() {
			started <- time.Now()
			// Not the handler's context: the consumer cannot cut this statement short.
			_, err := d.Tx.ExecContext(context.Background(), shutdownStatement(c))
			ended <- time.Now()
			t.Logf("the abandoned handler's statement returned: %v", err)
		})
		return outcome.Ack()
	})
	const timeout = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- inbox.NewConsumer(db, c.newForm(t, tbl), h, &inbox.Config{
			Queue: "q", Transactional: true, PollInterval: cellPoll, ShutdownTimeout: timeout, Logger: testLogger(t),
		}).Run(ctx)
	}()
	var began time.Time
	select {
	case began = <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the row was not delivered within 20 s")
	}
	time.Sleep(300 * time.Millisecond) // the statement reaches the server
	cancel()
	stopped := time.Now()
	const bound = 3 * time.Second
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(stopped); took > timeout+bound {
			t.Errorf("Run returned %v after its context ended, want at most the shutdown timeout %v and %v", took.Round(time.Millisecond), timeout, bound)
		}
	case <-time.After(timeout + bound):
		t.Errorf("Run did not return within %v of its context's end (shutdown timeout %v): it waits for the handler's statement", timeout+bound, timeout)
		<-done
		t.Logf("Run returned %v after its context ended", time.Since(stopped).Round(time.Millisecond))
	}

	// The row comes back by the form's rule: another consumer gets it.
	again := make(chan time.Time, 1)
	var onceAgain sync.Once
	stop := runConsumer(t, db, c.newForm(t, tbl), inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		onceAgain.Do(func() { again <- time.Now() })
		return outcome.Ack()
	}), &inbox.Config{Queue: "q"})
	select {
	case at := <-again:
		t.Logf("the abandoned row was delivered again %v after the handler's statement began", at.Sub(began).Round(time.Millisecond))
	case <-time.After(shutdownStatementFor + 30*time.Second):
		t.Fatalf("the abandoned row was not delivered again within %v", shutdownStatementFor+30*time.Second)
	}
	stop()
	select {
	case <-ended:
	case <-time.After(shutdownStatementFor + 30*time.Second):
		t.Fatal("the abandoned handler's statement did not return")
	}
	waitFor(t, 10*time.Second, "the abandoned transaction's connection to come back to the pool", func() bool {
		return db.Stats().InUse == 0
	})
}
