package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// rowlockCell is one backend with a database and a table of its own for one test.
type rowlockCell struct {
	backend
	db  *sql.DB
	tbl inbox.Table
}

// rowlockSetup opens the backend's database with a pool of pool and creates the table newTable
// describes.
func rowlockSetup(t *testing.T, b backend, pool int, newTable func(name string) inbox.Table) rowlockCell {
	t.Helper()
	db, tbl := b.openTable(t, pool, newTable)
	return rowlockCell{b, db, tbl}
}

// form opens a row lock form over the cell's table, closed when the test ends.
func (c rowlockCell) form(t *testing.T, q inbox.Binding) inbox.Form {
	t.Helper()
	return openForm(t, rowlock.New(c.dialect.(rowlock.Dialect), c.tbl), c.db, q)
}

// publish publishes msgs to the cell's table.
func (c rowlockCell) publish(t *testing.T, msgs ...inbox.Message) {
	t.Helper()
	c.enqueue(t, c.db, c.tbl, msgs...)
}

// rows counts the table's rows that satisfy where (with args, numbered from $1 on Postgres).
func (c rowlockCell) rows(t *testing.T, where string, args ...any) int {
	t.Helper()
	return c.countRows(t, c.db, c.tbl, where, args...)
}

// attemptOf reads a row's attempt column.
func (c rowlockCell) attemptOf(t *testing.T, id int64) int {
	t.Helper()
	return count(t, c.db, "SELECT "+c.q(t, "attempt")+" FROM "+c.q(t, c.tbl.Name)+" WHERE "+c.q(t, "id")+" = "+c.dialect.Placeholder(1), id)
}

// TestRowlockOutcomes settles a row with each outcome on each backend, with every optional
// column and with none, and checks the row afterwards and what the next claim sees.
func TestRowlockOutcomes(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name+"/full", func(t *testing.T) {
			c := rowlockSetup(t, b, 0, fullTable)
			f := c.form(t, inbox.Binding{Name: "q"})
			id := func(t *testing.T) string { return c.q(t, "id") + " = " + c.dialect.Placeholder(1) }

			for _, o := range []outcome.Outcome{outcome.Ack(), outcome.Drop()} {
				c.publish(t, inbox.Message{Queue: "q", Payload: []byte("p"), Headers: map[string]string{"k": "v"}})
				d := claimN(t, f, 1, 1)[0]
				if d.Attempt != 1 || d.Queue != "q" || string(d.Payload) != "p" || d.Headers["k"] != "v" {
					t.Fatalf("delivery = %+v; want attempt 1, group q, payload p, header k=v", d)
				}
				settle(t, f, d, o)
				if n := c.rows(t, id(t)+" AND "+c.q(t, "processed_at")+" IS NOT NULL", d.ID); n != 1 {
					t.Fatalf("%s: row %d not kept with processed_at stamped", o, d.ID)
				}
				claimN(t, f, 1, 0)
			}

			c.publish(t, inbox.Message{Queue: "q"})
			d := claimN(t, f, 1, 1)[0]
			settle(t, f, d, outcome.Retry())
			if a := c.attemptOf(t, d.ID); a != 1 {
				t.Fatalf("after Retry the row's attempt is %d, want 1", a)
			}
			again := claimN(t, f, 1, 1)[0]
			if again.ID != d.ID || again.Attempt != 2 {
				t.Fatalf("after Retry the claim got row %d attempt %d, want row %d attempt 2", again.ID, again.Attempt, d.ID)
			}

			settle(t, f, again, outcome.RetryAfter(time.Hour))
			if a := c.attemptOf(t, d.ID); a != 2 {
				t.Fatalf("after RetryAfter the row's attempt is %d, want 2", a)
			}
			soon := c.dialect.Time(time.Now().Add(50 * time.Minute))
			if n := c.rows(t, id(t)+" AND "+c.q(t, "retry_after")+" > "+c.dialect.Placeholder(2), d.ID, soon); n != 1 {
				t.Fatal("after RetryAfter(1h) the row's retry_after is not about an hour ahead")
			}
			claimN(t, f, 1, 0)
		})

		t.Run(b.name+"/minimal", func(t *testing.T) {
			c := rowlockSetup(t, b, 0, minimalTable)
			var logs inboxtest.Log
			f := c.form(t, inbox.Binding{Logger: logs.Logger(slog.LevelInfo)})

			for _, o := range []outcome.Outcome{outcome.Ack(), outcome.Drop()} {
				c.publish(t, inbox.Message{Payload: []byte("x")})
				d := claimN(t, f, 1, 1)[0]
				if d.Attempt != 0 {
					t.Fatalf("attempt %d without an attempt column, want 0", d.Attempt)
				}
				settle(t, f, d, o)
				if n := c.rows(t, ""); n != 0 {
					t.Fatalf("%s left %d rows, want the row deleted", o, n)
				}
			}

			c.publish(t, inbox.Message{Payload: []byte("x")})
			for _, o := range []outcome.Outcome{outcome.Retry(), outcome.RetryAfter(time.Hour)} {
				d := claimN(t, f, 1, 1)[0]
				settle(t, f, d, o)
				d2 := claimN(t, f, 1, 1)[0]
				if d2.ID != d.ID {
					t.Fatalf("after %s the claim got row %d, want %d at once", o, d2.ID, d.ID)
				}
				release(t, f, d2)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), c.tbl.Name) {
				t.Errorf("RetryAfter without a retry_after column logged no warning naming the table; log:\n%s", logs.String())
			}
		})
	}
}

// TestRowlockAttemptCounting: the first delivery reads 1; each Retry counts one more; a
// Release (a handler abandoned) counts none.
func TestRowlockAttemptCounting(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		f := c.form(t, inbox.Binding{Name: "q"})
		c.publish(t, inbox.Message{Queue: "q"})
		var seen []int
		for range 3 {
			d := claimN(t, f, 1, 1)[0]
			seen = append(seen, d.Attempt)
			settle(t, f, d, outcome.Retry())
		}
		d := claimN(t, f, 1, 1)[0]
		seen = append(seen, d.Attempt)
		release(t, f, d)
		d = claimN(t, f, 1, 1)[0]
		seen = append(seen, d.Attempt)
		settle(t, f, d, outcome.Ack())
		if fmt.Sprint(seen) != "[1 2 3 4 4]" {
			t.Fatalf("attempts seen %v, want [1 2 3 4 4] (the release counts none)", seen)
		}
		if a := c.attemptOf(t, d.ID); a != 3 {
			t.Fatalf("row's attempt %d after three retries and an ack, want 3", a)
		}
	})
}

// TestRowlockGroupsAndPriority: a claim takes only its queue's due rows, smaller priority
// first, then by id; rows held by an earlier claim are passed over.
func TestRowlockGroupsAndPriority(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		c.publish(t,
			inbox.Message{Queue: "a", Payload: []byte("a5"), Priority: 5},
			inbox.Message{Queue: "b", Payload: []byte("b0"), Priority: 0},
			inbox.Message{Queue: "a", Payload: []byte("a1"), Priority: 1},
			inbox.Message{Queue: "a", Payload: []byte("a1bis"), Priority: 1},
			inbox.Message{Queue: "a", Payload: []byte("a0-later"), Priority: 0, Delay: time.Hour},
			inbox.Message{Queue: "a", Payload: []byte("a-1"), Priority: -1},
		)
		payloads := func(ds []*inbox.Delivery) string {
			var s []string
			for _, d := range ds {
				s = append(s, string(d.Payload))
			}
			return strings.Join(s, " ")
		}
		fa := c.form(t, inbox.Binding{Name: "a"})
		first := claim(t, fa, 2)
		rest := claim(t, fa, 10)
		if got := payloads(first) + " | " + payloads(rest); got != "a-1 a1 | a1bis a5" {
			t.Fatalf("queue a claimed %q, want %q", got, "a-1 a1 | a1bis a5")
		}
		fb := c.form(t, inbox.Binding{Name: "b"})
		if got := payloads(claim(t, fb, 10)); got != "b0" {
			t.Fatalf("queue b claimed %q, want b0", got)
		}
		for _, d := range append(first, rest...) {
			settle(t, fa, d, outcome.Ack())
		}
	})
}

// TestRowlockClaimsDoNotWait: while one transaction holds a row, another claim returns the
// next row rather than waiting for the lock, and a claim with every row held returns none.
// A claim that waited would block until its context's deadline and fail.
func TestRowlockClaimsDoNotWait(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		c.publish(t, inbox.Message{Queue: "q"}, inbox.Message{Queue: "q"})
		f1 := c.form(t, inbox.Binding{Name: "q"})
		f2 := c.form(t, inbox.Binding{Name: "q"})
		held := claimN(t, f1, 1, 1)[0]
		next := claimN(t, f2, 1, 1)[0]
		if next.ID == held.ID {
			t.Fatalf("both claims got row %d", held.ID)
		}
		claimN(t, f2, 1, 0)
		settle(t, f1, held, outcome.Ack())
		settle(t, f2, next, outcome.Ack())
	})
}

// TestRowlockTransactional: the handler writes through Delivery.Tx; Ack commits the write with
// the settlement, and Retry and Drop roll it back while still settling the row.
func TestRowlockTransactional(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		notes := c.scratchTable(t, c.db, c.tbl.Name+"_notes", "row_id BIGINT NOT NULL")
		f := c.form(t, inbox.Binding{Name: "q", Transactional: true})
		// handle claims the next row, writes the handler's note through the row's transaction,
		// settles the row with o and counts the row's notes after.
		handle := func(o outcome.Outcome) (d *inbox.Delivery, noted int) {
			t.Helper()
			d = claimN(t, f, 1, 1)[0]
			if _, err := d.Tx.ExecContext(context.Background(), "INSERT INTO "+notes+" (row_id) VALUES ("+c.dialect.Placeholder(1)+")", d.ID); err != nil {
				t.Fatalf("the handler's write: %v", err)
			}
			settle(t, f, d, o)
			return d, count(t, c.db, "SELECT COUNT(*) FROM "+notes+" WHERE row_id = "+c.dialect.Placeholder(1), d.ID)
		}
		stamped := func() int { return c.rows(t, c.q(t, "processed_at")+" IS NOT NULL") }

		c.publish(t, inbox.Message{Queue: "q"})
		d, n := handle(outcome.Retry())
		if n != 0 {
			t.Fatalf("Retry kept the handler's write (%d notes)", n)
		}
		if a := c.attemptOf(t, d.ID); a != 1 {
			t.Fatalf("Retry in transactional mode left attempt %d, want 1", a)
		}

		if _, n := handle(outcome.Ack()); n != 1 {
			t.Fatalf("Ack committed %d notes, want the handler's one", n)
		}
		if stamped() != 1 {
			t.Fatal("Ack did not stamp the row")
		}

		c.publish(t, inbox.Message{Queue: "q"})
		if _, n := handle(outcome.Drop()); n != 0 {
			t.Fatalf("Drop kept the handler's write (%d notes)", n)
		}
		if stamped() != 2 {
			t.Fatal("Drop did not stamp the row")
		}
	})
}

// TestRowlockTransactionHeld: a handler that left a goroutine running a statement on its
// transaction makes the settlement fail with ErrTransactionHeld; the row is unchanged and
// claimable again.
func TestRowlockTransactionHeld(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		f := c.form(t, inbox.Binding{Name: "q", Transactional: true})
		c.publish(t, inbox.Message{Queue: "q"})
		d := claimN(t, f, 1, 1)[0]

		sleep, running := "SELECT pg_sleep(1.5)", "SELECT COUNT(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND query = $1"
		if b.name != "postgres" {
			sleep, running = "SELECT SLEEP(1.5)", "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO = ?"
		}
		// Unique to this test, so that its probe cannot see another test's sleep.
		sleep += " AS " + c.q(t, c.tbl.Name)
		leftBehind := make(chan error, 1)
		go func() {
			_, err := d.Tx.ExecContext(context.Background(), sleep)
			leftBehind <- err
		}()
		for deadline := time.Now().Add(10 * time.Second); count(t, c.db, running, sleep) == 0; {
			if time.Now().After(deadline) {
				t.Fatal("the handler's statement never showed as running")
			}
			time.Sleep(10 * time.Millisecond)
		}

		err := f.Settle(context.Background(), d, outcome.Ack())
		if !errors.Is(err, inbox.ErrTransactionHeld) {
			t.Fatalf("Settle = %v; want ErrTransactionHeld", err)
		}
		<-leftBehind
		if n := c.rows(t, c.q(t, "processed_at")+" IS NULL AND "+c.q(t, "attempt")+" = 0"); n != 1 {
			t.Fatal("the row changed, though the settlement failed")
		}
		// The transaction is rolled back in the background once the handler's statement is
		// done, so the row is claimable a moment after it.
		var again *inbox.Delivery
		waitFor(t, 10*time.Second, "the row to be claimable again", func() bool {
			if ds := claim(t, f, 1); len(ds) == 1 {
				again = ds[0]
			}
			return again != nil
		})
		if again.ID != d.ID || again.Attempt != 1 {
			t.Fatalf("claim after the failed settlement got row %d attempt %d, want row %d attempt 1", again.ID, again.Attempt, d.ID)
		}
		settle(t, f, again, outcome.Ack())
	})
}

// TestRowlockDrain: four consumers of 4 workers each, on pools of their own, drain 5,000 rows
// of one table; every row is handled exactly once and none is missed.
func TestRowlockDrain(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		rowlockDrain(t, c, b.dialect.(rowlock.Dialect), rowlockDrainPlan{rows: 5000, consumers: 4, workers: 4, within: 3 * time.Minute, exactlyOnce: true})
	})
}

// TestRowlockStrictLevels drains a table at the stricter levels, where claims meet
// serialization failures (Postgres 40001) and deadlocks (MySQL 1213): Claim retries them, and
// every row is handled exactly once. Postgres at serializable is the exception the package
// documents: a settlement's COMMIT fails there too, and its row is delivered again; no row is
// missed, but rows are handled more than once.
func TestRowlockStrictLevels(t *testing.T) {
	levels := map[string][]rowlock.Dialect{
		"postgres": {dialect.Postgres[isolation.RepeatableRead]{}, dialect.Postgres[isolation.Serializable]{}},
		"mysql":    {dialect.MySQL[isolation.RepeatableRead]{}},
		"mariadb":  {dialect.MariaDB[isolation.Serializable]{}},
	}
	for _, b := range backends(t, false) {
		for _, d := range levels[b.name] {
			t.Run(b.name+"/"+string(d.Level()), func(t *testing.T) {
				c := rowlockSetup(t, b, 0, fullTable)
				exactlyOnce := b.name != "postgres" || d.Level() != "serializable"
				rowlockDrain(t, c, d, rowlockDrainPlan{rows: 1000, consumers: 4, workers: 4, within: 3 * time.Minute, exactlyOnce: exactlyOnce})
			})
		}
	}
}

// rowlockDrainPlan says how rowlockDrain drains a table: rows rows, by consumers consumers of
// workers workers each, one row per delivery or, with batch > 0, in batches of up to batch
// rows, within the time given.
type rowlockDrainPlan struct {
	rows, consumers, workers, batch int
	within                          time.Duration
	exactlyOnce                     bool // else rows may be handled more than once, none missed
}

// rowlockDrain publishes the plan's rows to the cell's table and drains them by the plan, each
// consumer on a pool of its own with a form on d. It fails the test unless every row is
// handled (exactly once where the plan says so) and none is left to process within the plan's
// time, and it returns the most rows one delivery held.
func rowlockDrain(t *testing.T, c rowlockCell, d rowlock.Dialect, p rowlockDrainPlan) (largest int) {
	t.Helper()
	msgs := make([]inbox.Message, p.rows)
	for i := range msgs {
		msgs[i] = inbox.Message{Queue: "q", Payload: fmt.Appendf(nil, "%d", i), Priority: i % 7}
	}
	c.publish(t, msgs...)

	var (
		handled rowCounts
		mu      sync.Mutex
	)
	handle := func(_ context.Context, ds ...*inbox.Delivery) []outcome.Outcome {
		handled.add(ds...)
		mu.Lock()
		largest = max(largest, len(ds))
		mu.Unlock()
		return repeated(outcome.Ack(), len(ds))
	}
	var logs inboxtest.Log
	log := logs.Logger(slog.LevelDebug)
	var stops []func()
	for range p.consumers {
		cfg := &inbox.Config{Queue: "q", Workers: p.workers, PollInterval: 50 * time.Millisecond, Logger: log}
		stops = append(stops, startConsumer(t, consumerOf(t, c.open(t, p.workers+2), rowlock.New(d, c.tbl), p.batch, handle, cfg)))
	}
	left := ""
	if c.tbl.ProcessedAt != "" {
		left = c.q(t, c.tbl.ProcessedAt) + " IS NULL"
	}
	if !eventually(p.within, func() bool { return c.rows(t, left) == 0 }) {
		t.Errorf("the consumers left %d rows to process after %v", c.rows(t, left), p.within)
	}
	for _, stop := range stops {
		stop()
	}

	deliveries, distinct := handled.counted()
	if p.exactlyOnce {
		handled.checkOnce(t, "handled", p.rows)
	} else if distinct != p.rows {
		t.Errorf("%d rows handled, want %d", distinct, p.rows)
	}
	out := logs.String()
	t.Logf("%d rows, %d deliveries; claim conflicts retried: %d; claims failed after the retries: %d; settlements failed: %d",
		p.rows, deliveries, strings.Count(out, "claim conflicted"), strings.Count(out, "claim failed"), strings.Count(out, "settlement failed"))
	if t.Failed() {
		t.Logf("the consumers' last log lines:\n%s", lastLines(logs.String(), 20))
	}
	mu.Lock()
	defer mu.Unlock()
	return largest
}

// TestRowlockPool: with a pool of k and more workers than k-1, a consumer runs k-1 handlers at
// once, says so once in the log, and the application still gets a connection meanwhile.
func TestRowlockPool(t *testing.T) {
	const k, workers, rows = 4, 8, 24
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, k, fullTable)
		c.publish(t, messages("q", rows)...)

		var (
			running, most, handled atomic.Int32
			full                   = make(chan struct{}) // closed once k-1 handlers ran at once
			fullOnce               sync.Once
			done                   = make(chan struct{})
		)
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if n == k-1 {
				// Every connection but one is held: the application still gets that one.
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := c.db.QueryRowContext(actx, "SELECT 1").Scan(new(int))
				cancel()
				if err != nil {
					t.Errorf("the application's connection while %d deliveries hold theirs: %v", n, err)
				}
				fullOnce.Do(func() { close(full) })
			}
			select {
			case <-full:
			case <-time.After(10 * time.Second):
				t.Errorf("never %d handlers at once", k-1)
			}
			if handled.Add(1) == rows {
				close(done)
			}
			return outcome.Ack()
		})
		var logs inboxtest.Log
		stop := startConsumer(t, inbox.NewConsumer(c.db, rowlock.New(b.dialect.(rowlock.Dialect), c.tbl), h,
			&inbox.Config{Queue: "q", Workers: workers, PollInterval: 50 * time.Millisecond, Logger: logs.Logger(slog.LevelInfo)}))
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("the rows were not handled in a minute")
		}
		stop()
		if m := most.Load(); m != k-1 {
			t.Errorf("at most %d handlers ran at once, want %d (a pool of %d less one)", m, k-1, k)
		}
		if n := strings.Count(logs.String(), "running fewer workers"); n != 1 {
			t.Errorf("the log says %d times that fewer workers run, want once; log:\n%s", n, logs.String())
		}
	})
}
