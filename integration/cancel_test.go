package integration

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// cancelTable is runAtTable with a cancelled_at column.
func cancelTable(name string) inbox.Table {
	tbl := runAtTable(name)
	tbl.CancelledAt = "cancelled_at"
	return tbl
}

// createCancels creates the table of cancel requests, shared by every test's job table.
func createCancels(t *testing.T, db *sql.DB, b backend) {
	t.Helper()
	for _, st := range admin.CancelSchema(b.dialect) {
		mustExec(t, db, st)
	}
}

// cancelPoll is the cancel poll of the tests' consumers.
const cancelPoll = 200 * time.Millisecond

// TestCancel: on every cell, in plain and transactional mode, Cancel stamps a queued row at
// once (it is never delivered); a cancel in a transaction rolled back changes nothing (the row
// runs); a row in work is answered without waiting for its holder (CancelRequested; the advisory
// form's locks do not show, so Cancelled there), its handler's context ends with the cause
// ErrCancelled within the poll and a margin, its row ends cancelled and is not run again, and
// in transactional mode its handler's write rolls back; a settled row reports its state, and an
// unknown id NotFound; no request is left behind; the stats count the cancelled rows, and one
// requeued (admin.RequeueCancelled) runs.
func TestCancel(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		for _, tx := range []bool{false, true} {
			tests = append(tests, subtest{c.name() + "-" + txMode(tx), func(t *testing.T) { testCancel(t, c, tx) }})
		}
	}
	runConcurrently(t, 4, tests)
}

// cancelRun is what the handler of testCancel saw.
type cancelRun struct {
	mu      sync.Mutex
	handled map[string]int
	cause   error
	told    time.Time // when the held row's handler saw its context end
	started chan struct{}
}

func (r *cancelRun) count(p string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled[p]
}

func testCancel(t *testing.T, c cell, transactional bool) {
	db := c.b.open(t, 8)
	createCancels(t, db, c.b)
	tbl := c.b.newTable(t, db, cancelTable)
	side := c.b.scratchTable(t, db, tbl.Name+"_w", "v "+c.b.columnTypes().queue)
	client := c.kindClient(t, db, tbl)
	ctx := context.Background()
	ids, err := client.EnqueueIDs(ctx,
		inbox.Message{Queue: "q", Payload: []byte("held"), Priority: -1},
		inbox.Message{Queue: "q", Payload: []byte("queued")},
		inbox.Message{Queue: "q", Payload: []byte("rolled back")})
	if err != nil {
		t.Fatal(err)
	}
	held, queued, rolled := ids[0], ids[1], ids[2]

	got, err := client.Cancel(ctx, queued, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Outcome != inbox.Cancelled || got[1].Outcome != inbox.NotFound || !errors.Is(got[1].Err(), inbox.ErrNotFound) {
		t.Errorf("a queued row and an unknown id: %v, want cancelled and not found", got)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := client.CancelTx(ctx, tx, rolled); err != nil || got[0].Outcome != inbox.Cancelled {
		t.Errorf("in a transaction: %v, %v; want cancelled", got, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	run := &cancelRun{handled: map[string]int{}, started: make(chan struct{})}
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		p := string(d.Payload)
		run.mu.Lock()
		run.handled[p]++
		run.mu.Unlock()
		if p != "held" {
			return outcome.Ack()
		}
		close(run.started)
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		// Written once told (SQLite's one writer: a transactional handler that had written would
		// hold the database's write lock, which Cancel's stamp waits for), and rolled back with
		// the delivery's transaction in transactional mode.
		if _, err := writerOf(d, db).ExecContext(context.WithoutCancel(ctx), "INSERT INTO "+side+" (v) VALUES ('written')"); err != nil {
			t.Errorf("the handler's write: %v", err)
		}
		run.mu.Lock()
		run.cause, run.told = context.Cause(ctx), time.Now()
		run.mu.Unlock()
		return outcome.Retry() // settled as cancelled whatever it returns
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Workers: 2, Transactional: transactional, CancelPoll: cancelPoll, PollInterval: cellPoll})
	defer stop()
	select {
	case <-run.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not handed the held row")
	}

	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	began := time.Now()
	got, err = client.Cancel(bounded, held)
	took := time.Since(began)
	cancel()
	if err != nil {
		t.Fatalf("a row in work: %v", err)
	}
	if took > time.Second {
		t.Errorf("Cancel of a row in work took %v: it waited for the holder", took)
	}
	want := inbox.CancelRequested
	if c.form == "advisory" {
		want = inbox.Cancelled // session locks do not show in the table: the row is stamped
	}
	if got[0].Outcome != want {
		t.Errorf("a row in work: %v, want %v", got[0].Outcome, want)
	}
	waitFor(t, cancelPoll+5*time.Second, "the held row's handler told", func() bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		return run.cause != nil
	})
	run.mu.Lock()
	cause, told := run.cause, run.told.Sub(began)
	run.mu.Unlock()
	if !errors.Is(cause, inbox.ErrCancelled) {
		t.Errorf("the handler's context ended with the cause %v, want ErrCancelled", cause)
	}
	if told > cancelPoll+2*time.Second {
		t.Errorf("the handler was told %v after the cancel, beyond its poll (%v) and a margin", told, cancelPoll)
	}
	t.Logf("Cancel of the row in work returned in %v; its handler was told %v after Cancel began", took, told)
	waitFor(t, 10*time.Second, "the held row cancelled and the other row handled", func() bool {
		return c.b.countRows(t, db, tbl, c.q(t, "cancelled_at")+" IS NOT NULL AND "+c.q(t, "processed_at")+" IS NULL") == 2 &&
			run.count("rolled back") == 1
	})
	checkCancelled(t, c, db, tbl, run, transactional, side)

	for id, want := range map[int64]inbox.CancelOutcome{held: inbox.AlreadyCancelled, rolled: inbox.AlreadyProcessed} {
		got, err := client.Cancel(ctx, id)
		if err != nil || got[0].Outcome != want || !errors.Is(got[0].Err(), inbox.ErrSettled) {
			t.Errorf("row %d: %v, %v; want %v", id, got, err, want)
		}
	}
	waitFor(t, 5*time.Second, "no request left", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM inbox_cancels WHERE table_name = "+c.ph(1), tbl.Name) == 0
	})
	checkRequeueCancelled(t, db, c, tbl, run, queued)
}

// checkRequeueCancelled: the stats count the two cancelled rows; requeued, the row cancelled
// while queued runs once, and the stats count one.
func checkRequeueCancelled(t *testing.T, db *sql.DB, c cell, tbl inbox.Table, run *cancelRun, queued int64) {
	t.Helper()
	a, err := admin.New(db, c.b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := func() int64 {
		st, err := a.Stats(context.Background())
		if err != nil || len(st) != 1 {
			t.Fatalf("Stats: %v, %v", st, err)
		}
		return st[0].Cancelled
	}
	if n := cancelled(); n != 2 {
		t.Errorf("Stats count %d cancelled rows, want 2", n)
	}
	if n, err := a.RequeueCancelled(context.Background(), admin.IDs(queued)); err != nil || n != 1 {
		t.Fatalf("RequeueCancelled: %d, %v; want 1", n, err)
	}
	waitFor(t, 10*time.Second, "the requeued row handled", func() bool { return run.count("queued") == 1 })
	if n := cancelled(); n != 1 {
		t.Errorf("Stats count %d cancelled rows after the requeue, want 1", n)
	}
}

// checkCancelled checks, after the cancels, that no cancelled row ran (again), and that the held
// row's write is kept outside transactional mode and rolled back in it.
func checkCancelled(t *testing.T, c cell, db *sql.DB, tbl inbox.Table, run *cancelRun, transactional bool, side string) {
	t.Helper()
	time.Sleep(3 * cellPoll) // claims that would take a cancelled row have had their chance
	if n := run.count("queued"); n != 0 {
		t.Errorf("the row cancelled while queued was handled %d times", n)
	}
	if n := run.count("held"); n != 1 {
		t.Errorf("the row cancelled in work was handled %d times, want once", n)
	}
	writes := count(t, db, "SELECT COUNT(*) FROM "+side)
	if transactional && writes != 0 {
		t.Errorf("the cancelled handler's write survived its transaction")
	}
	if !transactional && writes != 1 {
		t.Errorf("%d writes of the cancelled handler, want its one (outside a transaction)", writes)
	}
}

// TestCancelNeedsCancelsTable: a consumer of a table with a CancelledAt column fails Run with
// ErrSchema naming the statement that creates inbox_cancels where it is missing (its form's Open
// checks it; a scratch SQLite database has none), and runs once it is there.
func TestCancelNeedsCancelsTable(t *testing.T) {
	b := onlyBackends(t, "sqlite")[0]
	db, tbl := b.openTable(t, 4, cancelTable)
	h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
	cons := inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Logger: testLogger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cons.Run(ctx)
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), admin.CancelSchema(b.dialect)[0]) {
		t.Fatalf("Run: %v; want ErrSchema naming %s", err, admin.CancelSchema(b.dialect)[0])
	}
	createCancels(t, db, b)
	runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{})()
}

// TestCancelAfterSuccess: a handler that acks after its row was cancelled keeps its success
// outside transactional mode, the row processed and stamped cancelled_at to say a cancel was
// asked; in transactional mode its ack is overruled, its writes roll back and the row is
// cancelled. On every cell.
func TestCancelAfterSuccess(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		for _, tx := range []bool{false, true} {
			tests = append(tests, subtest{c.name() + "-" + txMode(tx), func(t *testing.T) { testCancelAfterSuccess(t, c, tx) }})
		}
	}
	runConcurrently(t, 4, tests)
}

func testCancelAfterSuccess(t *testing.T, c cell, transactional bool) {
	db := c.b.open(t, 8)
	createCancels(t, db, c.b)
	tbl := c.b.newTable(t, db, cancelTable)
	client := c.kindClient(t, db, tbl)
	ctx := context.Background()
	ids, err := client.EnqueueIDs(ctx, inbox.Message{Queue: "q", Payload: []byte("acks")})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		close(started)
		<-ctx.Done()
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Transactional: transactional, CancelPoll: cancelPoll, PollInterval: cellPoll})
	defer stop()
	<-started
	if _, err := client.Cancel(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	where := c.q(t, "cancelled_at") + " IS NOT NULL AND " + c.q(t, "processed_at") + " IS NOT NULL"
	if transactional {
		where = c.q(t, "cancelled_at") + " IS NOT NULL AND " + c.q(t, "processed_at") + " IS NULL"
	}
	waitFor(t, 10*time.Second, "the row settled: "+where, func() bool { return c.b.countRows(t, db, tbl, where) == 1 })
	waitFor(t, 5*time.Second, "no request left", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM inbox_cancels WHERE table_name = "+c.ph(1), tbl.Name) == 0
	})
}

// TestRetentionOfCancelledRows: Retention.CancelledAge deletes rows cancelled before the age and
// keeps those cancelled since, and a processed row stamped cancelled_at long ago (a cancel asked
// after it succeeded) keeps to the processed rows' age, on every database.
func TestRetentionOfCancelledRows(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 6)
		createCancels(t, db, b)
		createSweeps(t, b, db)
		tbl := b.newTable(t, db, cancelTable)
		old, young := b.dialect.Time(time.Now().Add(-2*retentionAge)), b.dialect.Time(time.Now().Add(-time.Minute))
		name, q := b.q(t, tbl.Name), func(c string) string { return b.q(t, c) }
		ins := "INSERT INTO " + name + " (" + q(tbl.Queue) + ", " + q(tbl.CancelledAt) + ", " + q(tbl.ProcessedAt) + ") VALUES (" + b.placeholders(3) + ")"
		mustExec(t, db, ins, "q", old, nil)   // deleted
		mustExec(t, db, ins, "q", young, nil) // kept: young
		mustExec(t, db, ins, "q", old, young) // kept: processed, and processed young
		h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
		ret := &inbox.Retention{CancelledAge: retentionAge, Interval: 100 * time.Millisecond, Budget: time.Second}
		runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Retention: ret})
		waitFor(t, 30*time.Second, "the old cancelled row deleted", func() bool {
			return b.countRows(t, db, tbl, "1 = 1") == 2
		})
		if n := b.countRows(t, db, tbl, q(tbl.ProcessedAt)+" IS NOT NULL"); n != 1 {
			t.Errorf("the processed row a cancel was asked of is gone")
		}
	})
}

// TestCancelRequestsApplied: a consumer's poll applies the requests of rows it does not hold: a
// row queued again (here one delayed, whose request was left as a holder that rolled back would
// leave it) is cancelled, and the requests of a dead row and of an unknown id are deleted, on
// every database.
func TestCancelRequestsApplied(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 6)
		createCancels(t, db, b)
		tbl := b.newTable(t, db, cancelTable)
		client, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := client.EnqueueIDs(context.Background(),
			inbox.Message{Queue: "q", Payload: []byte("delayed"), RunAt: time.Now().Add(time.Hour)},
			inbox.Message{Queue: "q", Payload: []byte("dead")})
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "UPDATE "+b.q(t, tbl.Name)+" SET "+b.q(t, tbl.DeadAt)+" = "+b.dialect.Placeholder(1)+" WHERE "+b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(2), b.dialect.Time(time.Now()), ids[1])
		for _, id := range []int64{ids[0], ids[1], 1 << 40} {
			mustExec(t, db, "INSERT INTO inbox_cancels (table_name, id, requested_at) VALUES ("+b.placeholders(3)+")", tbl.Name, id, b.dialect.Time(time.Now()))
		}
		h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
		runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", CancelPoll: cancelPoll})
		waitFor(t, 10*time.Second, "every request applied", func() bool {
			return count(t, db, "SELECT COUNT(*) FROM inbox_cancels WHERE table_name = "+b.dialect.Placeholder(1), tbl.Name) == 0
		})
		if n := b.countRows(t, db, tbl, b.q(t, tbl.CancelledAt)+" IS NOT NULL"); n != 1 {
			t.Errorf("%d rows cancelled, want the delayed one", n)
		}
		if n := b.countRows(t, db, tbl, b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(1)+" AND "+b.q(t, tbl.CancelledAt)+" IS NOT NULL", ids[0]); n != 1 {
			t.Errorf("the delayed row is not the one cancelled")
		}
	})
}

// TestCancelFreesUniqueKey: a cancelled job holds no unique key, in every scope: cancelled while
// queued, or settled as cancelled after its handler was told in work (lease form), a publish of
// its key then inserts a new row, on every database.
func TestCancelFreesUniqueKey(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 6)
		createCancels(t, db, b)
		tbl := b.newUniqueTable(t, db, func(tbl *inbox.Table) { tbl.CancelledAt = "cancelled_at" })
		client, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		publish := func(key string) inbox.Enqueued {
			t.Helper()
			got, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", Payload: []byte(key), UniqueKey: key})
			if err != nil {
				t.Fatal(err)
			}
			return got[0]
		}
		queued := publish("queued")
		if got, err := client.Cancel(ctx, queued.ID); err != nil || got[0].Outcome != inbox.Cancelled {
			t.Fatalf("cancelling the queued row: %v, %v", got, err)
		}
		if again := publish("queued"); again.Duplicate {
			t.Errorf("the key of a row cancelled while queued is still held (by %d)", again.ID)
		}

		held := publish("held")
		started := make(chan struct{})
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			if string(d.Payload) == "held" {
				close(started)
				<-ctx.Done()
			}
			return outcome.Ack()
		})
		stop := runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", CancelPoll: cancelPoll})
		defer stop()
		<-started
		if dup := publish("held"); !dup.Duplicate {
			t.Fatalf("a publish of the key of a row in work inserted row %d", dup.ID)
		}
		if got, err := client.Cancel(ctx, held.ID); err != nil || got[0].Outcome != inbox.CancelRequested {
			t.Fatalf("cancelling the row in work: %v, %v", got, err)
		}
		waitFor(t, 10*time.Second, "the row in work settled as cancelled", func() bool {
			return b.countRows(t, db, tbl, b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(1)+" AND "+b.q(t, tbl.CancelledAt)+" IS NOT NULL", held.ID) == 1
		})
		if again := publish("held"); again.Duplicate {
			t.Errorf("the key of a row cancelled in work is still held (by %d)", again.ID)
		}
	})
}
