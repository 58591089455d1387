package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// runAtTable is deadTable naming the lease column, so that Reschedule tells a leased row.
func runAtTable(name string) inbox.Table {
	tbl := deadTable(name)
	tbl.LockedUntil = "locked_until"
	return tbl
}

// handledLog records when each payload was first handled.
type handledLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (l *handledLog) handler() inbox.Handler {
	return inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.at[string(d.Payload)]; !ok {
			l.at[string(d.Payload)] = time.Now()
		}
		return outcome.Ack()
	})
}

func (l *handledLog) when(p string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.at[p]
	return at, ok
}

// TestRunAt: rows published with a run time, alone, in a batch and in the caller's transaction,
// are not claimed before it and are claimed soon after it, on every cell, while a row without
// one and a row whose run time has passed are claimed at once.
func TestRunAt(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		db := c.b.open(t, 6)
		tbl := c.b.newTable(t, db, runAtTable)
		client := c.kindClient(t, db, tbl)
		ctx := context.Background()
		at := time.Now().Add(2 * time.Second)
		if err := client.Enqueue(ctx, inbox.Message{Queue: "q", Payload: []byte("single"), RunAt: at}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.EnqueueIDs(ctx,
			inbox.Message{Queue: "q", Payload: []byte("batch 1"), RunAt: at},
			inbox.Message{Queue: "q", Payload: []byte("now")},
			inbox.Message{Queue: "q", Payload: []byte("past"), RunAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		); err != nil {
			t.Fatal(err)
		}
		if err := client.Enqueue(ctx, inbox.Message{Queue: "q", Payload: []byte("batch 2"), RunAt: at}, inbox.Message{Queue: "q", Payload: []byte("batch 3"), RunAt: at}); err != nil {
			t.Fatal(err)
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := client.EnqueueTx(ctx, tx, inbox.Message{Queue: "q", Payload: []byte("tx"), RunAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		log := &handledLog{at: map[string]time.Time{}}
		stop := runConsumer(t, db, c.newForm(t, tbl), log.handler(), &inbox.Config{Queue: "q"})
		defer stop()
		waitFor(t, 10*time.Second, "every row handled", func() bool {
			for _, p := range []string{"single", "batch 1", "batch 2", "batch 3", "tx", "now", "past"} {
				if _, ok := log.when(p); !ok {
					return false
				}
			}
			return true
		})
		for _, p := range []string{"single", "batch 1", "batch 2", "batch 3", "tx"} {
			got, _ := log.when(p)
			if got.Before(at) {
				t.Errorf("%q was handled at %v, %v before its run time", p, got.Format(time.StampMicro), at.Sub(got))
			}
			if got.After(at.Add(3 * time.Second)) {
				t.Errorf("%q was handled %v after its run time", p, got.Sub(at))
			}
		}
		for _, p := range []string{"now", "past"} {
			if got, _ := log.when(p); !got.Before(at) {
				t.Errorf("%q was handled at its neighbours' run time (%v after it), not at once", p, got.Sub(at))
			}
		}
		// Year 9999's last microsecond is stored and read back exactly.
		y9999 := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
		ids, err := client.EnqueueIDs(ctx, inbox.Message{Queue: "other", Payload: []byte("far"), RunAt: y9999})
		if err != nil {
			t.Fatal(err)
		}
		var raw any
		if err := db.QueryRow("SELECT "+c.q(t, "retry_after")+" FROM "+c.q(t, tbl.Name)+" WHERE "+c.q(t, "id")+" = "+c.ph(1), ids[0]).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if back, err := dialect.ScannedTime(raw); err != nil || !back.Equal(y9999) {
			t.Errorf("year 9999 was stored as %v (%v), read back as %v", raw, err, back)
		}
	})
}

// TestReschedule: Reschedule moves a queued row (which then runs at its new time), returns
// ErrInWork for a row a running handler holds without waiting for it (the advisory form's
// locks do not show, so there the row is moved, as documented), ErrSettled for a processed row
// and ErrNotFound for an unknown id, on every cell.
func TestReschedule(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		db := c.b.open(t, 6)
		tbl := c.b.newTable(t, db, runAtTable)
		client := c.kindClient(t, db, tbl)
		ctx := context.Background()
		ids, err := client.EnqueueIDs(ctx,
			inbox.Message{Queue: "q", Payload: []byte("queued"), RunAt: time.Now().Add(time.Hour)},
			inbox.Message{Queue: "q", Payload: []byte("held")})
		if err != nil {
			t.Fatal(err)
		}
		queued, held := ids[0], ids[1]
		if err := client.Reschedule(ctx, 1<<40, time.Now()); !errors.Is(err, inbox.ErrNotFound) {
			t.Errorf("an unknown id: %v, want ErrNotFound", err)
		}

		// A running handler holds "held" until released.
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		log := &handledLog{at: map[string]time.Time{}}
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			if string(d.Payload) == "held" {
				once.Do(func() { close(started) })
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return log.handler().Handle(ctx, d)
		})
		stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
		defer stop()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler was not handed the row")
		}
		bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
		began := time.Now()
		err = client.Reschedule(bounded, held, time.Now().Add(time.Hour))
		took := time.Since(began)
		cancel()
		if took > time.Second {
			t.Errorf("Reschedule of a held row took %v: it waited for the holder", took)
		}
		want := inbox.ErrInWork
		if c.form == "advisory" {
			want = nil // session locks do not show in the table: the row is moved
		}
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("a row in work: %v, want %v", err, want)
		}

		// The queued row moves to a second from now, and runs then.
		at := time.Now().Add(time.Second)
		if err := client.Reschedule(ctx, queued, at); err != nil {
			t.Fatalf("a queued row: %v", err)
		}
		close(release)
		waitFor(t, 10*time.Second, "the rescheduled row handled", func() bool { _, ok := log.when("queued"); return ok })
		if got, _ := log.when("queued"); got.Before(at) {
			t.Errorf("the rescheduled row ran %v before its new time", at.Sub(got))
		}
		waitFor(t, 10*time.Second, "the held row settled", func() bool {
			return c.b.countRows(t, db, tbl, c.q(t, "processed_at")+" IS NOT NULL") == 2
		})
		if err := client.Reschedule(ctx, queued, time.Now().Add(time.Hour)); !errors.Is(err, inbox.ErrSettled) {
			t.Errorf("a processed row: %v, want ErrSettled", err)
		}
	})
}

// TestPublishClock: a publisher whose host clock runs 10 s behind the database's delays a row
// by 4 s into the past, so a consumer takes it at once; with a DatabaseClock (Client.WithClock)
// the row waits its 4 s, on every database. The first case shows the test can tell.
func TestPublishClock(t *testing.T) {
	const skew = -10 * time.Second
	var tests []subtest
	for _, c := range cells(t) {
		if c.form != "lease" {
			continue
		}
		for _, database := range []bool{false, true} {
			name := c.b.name + "/host clock"
			if database {
				name = c.b.name + "/database clock"
			}
			tests = append(tests, subtest{name, func(t *testing.T) {
				db := c.b.open(t, 4)
				tbl := c.b.newTable(t, db, runAtTable)
				var clock inbox.Clock = skewedClock(skew)
				if database {
					clock = &inbox.DatabaseClock{DB: db, Dialect: c.b.dialect, Host: skewedClock(skew)}
				}
				client := c.kindClient(t, db, tbl).WithClock(clock)
				published := time.Now()
				if err := client.Enqueue(context.Background(), inbox.Message{Queue: "q", Payload: []byte("delayed"), Delay: 4 * time.Second}); err != nil {
					t.Fatal(err)
				}
				log := &handledLog{at: map[string]time.Time{}}
				stop := runConsumer(t, db, c.newForm(t, tbl), log.handler(), &inbox.Config{Queue: "q"})
				defer stop()
				waitFor(t, 10*time.Second, "the row handled", func() bool { _, ok := log.when("delayed"); return ok })
				got, _ := log.when("delayed")
				waited := got.Sub(published)
				if database && waited < 3*time.Second {
					t.Errorf("with the database's clock, the row delayed 4 s ran after %v", waited)
				}
				if !database && waited > 2*time.Second {
					t.Errorf("with a host clock 10 s behind, the row delayed 4 s ran after %v; want at once (the test cannot tell otherwise)", waited)
				}
			}})
		}
	}
	runConcurrently(t, 4, tests)
}

// TestRescheduleKey: RescheduleKey moves the row that holds a unique key, by its id, and
// returns that id; a key no row holds is ErrNotFound; on every database.
func TestRescheduleKey(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := b.newUniqueTable(t, db, nil)
		client, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "report-7"}, inbox.Message{Queue: "q", UniqueKey: "report-8"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := client.RescheduleKey(ctx, "report-7", time.Now().Add(time.Hour))
		if err != nil || id != res[0].ID {
			t.Fatalf("RescheduleKey(report-7) = %d, %v; want row %d moved", id, err, res[0].ID)
		}
		later := b.q(t, tbl.RetryAfter) + " > " + b.dialect.Placeholder(1)
		if n := b.countRows(t, db, tbl, later, b.dialect.Time(time.Now().Add(30*time.Minute))); n != 1 {
			t.Errorf("%d rows run in an hour, want report-7's alone", n)
		}
		if _, err := client.RescheduleKey(ctx, "nosuch", time.Now()); !errors.Is(err, inbox.ErrNotFound) {
			t.Errorf("RescheduleKey of a key no row holds: %v, want ErrNotFound", err)
		}
	})
}
