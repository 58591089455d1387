package integration

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/pgnotify"
)

// A poll so long that a row handled within wakeLimit was woken for, not polled.
const (
	longPoll  = time.Minute
	wakeLimit = 10 * time.Second
)

// countingWaker counts the wake-ups of the Waker it wraps.
type countingWaker struct {
	inbox.Waker
	wakes atomic.Int32
}

func (w *countingWaker) Watch(ctx context.Context, table string, log *slog.Logger, wake func()) {
	w.Waker.Watch(ctx, table, log, func() { w.wakes.Add(1); wake() })
}

// waitWoken waits up to wakeLimit for cond, failing the test with what when it never holds.
func waitWoken(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventually(wakeLimit, cond) {
		t.Fatalf("%s: not within %v (the poll interval is %v)", what, wakeLimit, longPoll)
	}
}

// TestNotifyWakesAConsumerOnAnotherPool: a row EnqueueTx commits on one pool is handled by a
// consumer on another, listening through pgnotify, well before its poll; a rolled-back publish
// wakes no one; after its listening connection is killed, the listener listens again and the
// consumer claims at once the row published meanwhile without a notification.
func TestNotifyWakesAConsumerOnAnotherPool(t *testing.T) {
	b := backends(t, false)[0]
	pub, cons := b.open(t, 4), b.open(t, 4)
	tbl := minimalTable(tableName(t))
	tbl.Notify = true
	b.createTable(t, pub, tbl)

	var handled atomic.Int32
	h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome {
		handled.Add(1)
		return outcome.Ack()
	})
	w := &countingWaker{Waker: &pgnotify.Listener{ConnString: b.dsn}}
	stop := runConsumer(t, cons, lease.New(b.dialect, tbl, nil), h, &inbox.Config{PollInterval: longPoll, Wakeups: w, Retry: inbox.RetryAtOnce})
	defer stop()
	waitWoken(t, "the listener's first wake-up, once it listens", func() bool { return w.wakes.Load() == 1 })

	b.enqueueTx(t, pub, tbl, false, inbox.Message{Payload: []byte("x")})
	b.enqueueTx(t, pub, tbl, true, inbox.Message{Payload: []byte("x")})
	waitWoken(t, "the committed row handled", func() bool { return handled.Load() == 1 })
	if got := w.wakes.Load(); got != 2 {
		t.Fatalf("%d wake-ups after a rolled-back and a committed publish, want 2: the one at listening and the commit's", got)
	}

	// A row that no notification announces, then the listening connection killed.
	mustExec(t, pub, "INSERT INTO "+b.q(t, tbl.Name)+" (payload) VALUES ('y')")
	var killed int
	if err := pub.QueryRow("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
		"LISTEN "+`"`+inbox.NotifyChannel(tbl.Name)+`"`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("killing the listening connection: %d killed, %v", killed, err)
	}
	waitWoken(t, "the unannounced row handled once the listener listens again", func() bool { return handled.Load() == 2 })
	b.enqueueTx(t, pub, tbl, true, inbox.Message{Payload: []byte("x")})
	waitWoken(t, "a row published after the listener came back handled", func() bool { return handled.Load() == 3 })
}

// TestDataVersionWakesAConsumerOnAnotherPool: on SQLite, a row committed through another pool
// of the same file is handled well before the poll.
func TestDataVersionWakesAConsumerOnAnotherPool(t *testing.T) {
	b := backends(t, true)[3]
	cons := b.open(t, 4)
	var file string
	if err := cons.QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
		t.Fatal(err)
	}
	pub := b.openDSN(t, SQLiteDSN(file), 4)
	tbl := b.newTable(t, pub, minimalTable)

	var handled atomic.Int32
	h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome {
		handled.Add(1)
		return outcome.Ack()
	})
	w := &countingWaker{Waker: &inbox.DataVersionWaker{DB: cons}}
	stop := runConsumer(t, cons, lease.New(b.dialect, tbl, nil), h, &inbox.Config{PollInterval: longPoll, Wakeups: w, Retry: inbox.RetryAtOnce})
	defer stop()
	waitWoken(t, "the waker's first read", func() bool { return w.wakes.Load() >= 1 })
	for i := int32(1); i <= 3; i++ {
		b.enqueueTx(t, pub, tbl, true, inbox.Message{Payload: []byte("x")})
		waitWoken(t, "the row committed on the other pool handled", func() bool { return handled.Load() == i })
	}
}

// TestDueRowsClaimedOnTime: with a poll of a minute, a row published with Delay, and a row a
// handler put off with RetryAfter, are each claimed once due, on every database.
func TestDueRowsClaimedOnTime(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 4, fullTable)
		var attempts atomic.Int32
		h := inbox.HandlerFunc(func(_ context.Context, d *inbox.Delivery) outcome.Outcome {
			if attempts.Add(1) == 2 {
				return outcome.RetryAfter(200 * time.Millisecond)
			}
			return outcome.Ack()
		})
		stop := runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", PollInterval: longPoll})
		defer stop()
		start := time.Now()
		b.enqueue(t, db, tbl, inbox.Message{Queue: "q", Delay: 300 * time.Millisecond})
		waitWoken(t, "the delayed row handled", func() bool { return attempts.Load() == 1 })
		if since := time.Since(start); since < 300*time.Millisecond {
			t.Fatalf("the row delayed 300ms was handled after %v", since)
		}
		b.enqueue(t, db, tbl, inbox.Message{Queue: "q"})
		waitWoken(t, "the row put off by RetryAfter handled again", func() bool { return attempts.Load() == 3 })
	})
}
