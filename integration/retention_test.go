package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// retentionAge is the age past which the tests' sweepers delete settled rows; the old rows are
// twice as old, the young ones a minute old.
const retentionAge = time.Hour

// sweeps records the retention passes the consumers report (inbox.RetentionObserver).
type sweeps struct {
	mu  sync.Mutex
	all []inbox.Sweep
}

func (s *sweeps) Claimed(context.Context, inbox.Claim) {}
func (s *sweeps) Handling(ctx context.Context, _ inbox.Unit) context.Context {
	return ctx
}
func (s *sweeps) Settled(context.Context, inbox.Settlement) {}
func (s *sweeps) Swept(_ context.Context, sw inbox.Sweep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, sw)
}

func (s *sweeps) list() []inbox.Sweep {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.all)
}

// seedSettled writes n rows of queue q to tbl, stamped processed (processed) or dead at at, in
// multi-row INSERTs.
func seedSettled(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, q string, n int, processed bool, at time.Time) {
	t.Helper()
	col := tbl.ProcessedAt
	if !processed {
		col = tbl.DeadAt
	}
	for n > 0 {
		k := min(n, 200)
		rows := make([]string, k)
		args := make([]any, 0, 2*k)
		for i := range rows {
			rows[i] = "(" + b.dialect.Placeholder(2*i+1) + ", " + b.dialect.Placeholder(2*i+2) + ")"
			args = append(args, q, b.dialect.Time(at))
		}
		mustExec(t, db, "INSERT INTO "+b.q(t, tbl.Name)+" ("+b.q(t, tbl.Queue)+", "+b.q(t, col)+") VALUES "+strings.Join(rows, ", "), args...)
		n -= k
	}
}

// createSweeps creates the sweeper leases' table where it is not there (other tests share it:
// each job table has its own row).
func createSweeps(t *testing.T, b backend, db *sql.DB) {
	t.Helper()
	for _, st := range admin.RetentionSchema(b.dialect) {
		mustExec(t, db, st)
	}
}

// expiredRows counts tbl's rows processed or dead before the age.
func expiredRows(t *testing.T, b backend, db *sql.DB, tbl inbox.Table) int {
	cut := b.dialect.Time(time.Now().Add(-retentionAge))
	return b.countRows(t, db, tbl, b.q(t, tbl.ProcessedAt)+" < "+b.dialect.Placeholder(1)+" OR "+b.q(t, tbl.DeadAt)+" < "+b.dialect.Placeholder(2), cut, cut)
}

// TestRetention: three consumers with retention on, each its own pool as a process would have,
// sweep one table on every database in every form. Only one holds the sweeper lease at a time
// (the passes they report never overlap); the old processed and dead rows go, in batches of at
// most BatchSize rows; the young settled rows, the rows queued in another queue and a row a
// running handler holds in work stay; and, on the databases with row locks, an old processed
// row another transaction locks stays without holding the sweep up, and goes once it is free.
func TestRetention(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		tests = append(tests, subtest{c.name(), func(t *testing.T) { testRetention(t, c) }})
	}
	runConcurrently(t, 3, tests)
}

func testRetention(t *testing.T, c cell) {
	b := c.b
	dbs := b.openDBs(t, 4, 6)
	tbl := b.newTable(t, dbs[0], deadTable)
	createSweeps(t, b, dbs[0])
	const batch = 100
	old, young := time.Now().Add(-2*retentionAge), time.Now().Add(-time.Minute)
	seedSettled(t, b, dbs[0], tbl, "q", 900, true, old)
	seedSettled(t, b, dbs[0], tbl, "q", 250, false, old)
	seedSettled(t, b, dbs[0], tbl, "q", 40, true, young)
	seedSettled(t, b, dbs[0], tbl, "q", 10, false, young)
	b.enqueue(t, dbs[0], tbl, messages("other", 30)...) // no consumer takes these
	// The row the handler holds comes first in claim order: on InnoDB the row lock form's claim
	// keeps a lock on every row its scan of the claim index read, the dead rows (processed_at
	// NULL) among them, until its handler ends; the sweep passes over those (SKIP LOCKED) and a
	// later pass deletes them. Here the claim reads the held row alone.
	b.enqueue(t, dbs[0], tbl, inbox.Message{Queue: "q", Payload: []byte("held"), Priority: -1})
	held := count(t, dbs[0], "SELECT MAX("+b.q(t, tbl.ID)+") FROM "+b.q(t, tbl.Name))

	// An old processed row another transaction locks, where there are row locks.
	var locker *sql.Tx
	var locked int
	if b.name != "sqlite" {
		locked = count(t, dbs[0], "SELECT MIN("+b.q(t, tbl.ID)+") FROM "+b.q(t, tbl.Name))
		var err error
		if locker, err = dbs[3].BeginTx(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		defer locker.Rollback()
		if _, err := locker.Exec("SELECT "+b.q(t, tbl.ID)+" FROM "+b.q(t, tbl.Name)+" WHERE "+b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(1)+" FOR UPDATE", locked); err != nil {
			t.Fatal(err)
		}
	}

	inWork, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		once.Do(func() { close(inWork) })
		select {
		case <-release:
		case <-ctx.Done():
		}
		return outcome.Ack()
	})
	rec := &sweeps{}
	ret := &inbox.Retention{ProcessedAge: retentionAge, DeadAge: retentionAge, BatchSize: batch, Interval: 100 * time.Millisecond, Budget: time.Second}
	for i := range 3 {
		runConsumer(t, dbs[i], c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Retention: ret, Observer: rec, ShutdownTimeout: time.Second})
	}
	<-inWork

	want := 0
	if locker != nil {
		want = 1
	}
	if !eventually(time.Minute, func() bool { return expiredRows(t, b, dbs[0], tbl) == want }) {
		t.Fatalf("%d old settled rows left, want %d; passes: %+v", expiredRows(t, b, dbs[0], tbl), want, rec.list())
	}
	if got := b.countRows(t, dbs[0], tbl, b.q(t, tbl.Queue)+" = 'other'"); got != 30 {
		t.Errorf("%d rows of the other queue are left, want 30", got)
	}
	if got := b.countRows(t, dbs[0], tbl, b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(1), held); got != 1 {
		t.Errorf("the row in work is gone")
	}
	if got := b.countRows(t, dbs[0], tbl, b.q(t, tbl.ProcessedAt)+" IS NOT NULL OR "+b.q(t, tbl.DeadAt)+" IS NOT NULL"); got != 50+want {
		t.Errorf("%d settled rows are left, want the 50 young ones and %d locked", got, want)
	}
	if locker != nil {
		if err := locker.Commit(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the locked row deleted once free", func() bool { return expiredRows(t, b, dbs[0], tbl) == 0 })
	}
	close(release)
	waitFor(t, 10*time.Second, "the last pass reported", func() bool { return deletedBy(rec.list()) == 1150 })
	checkSweeps(t, rec.list(), batch, 1150)
}

// deletedBy is how many rows the passes deleted.
func deletedBy(all []inbox.Sweep) (n int64) {
	for _, sw := range all {
		n += sw.Deleted
	}
	return n
}

// checkSweeps checks the passes the consumers reported: none overlaps another, no statement
// deleted more than batch rows, and all of them deleted deleted rows.
func checkSweeps(t *testing.T, all []inbox.Sweep, batch int, deleted int64) {
	t.Helper()
	slices.SortFunc(all, func(a, b inbox.Sweep) int { return a.Began.Compare(b.Began) })
	var total int64
	holders := map[string]int{}
	for i, sw := range all {
		total += sw.Deleted
		holders[sw.Holder]++
		if sw.Deleted > int64(sw.Batches*batch) {
			t.Errorf("a pass deleted %d rows in %d statements of at most %d", sw.Deleted, sw.Batches, batch)
		}
		if i > 0 && sw.Began.Before(all[i-1].Ended) {
			t.Errorf("pass %d of %s began at %v, before pass %d of %s ended at %v: two held the lease", i, sw.Holder, sw.Began.Format(time.StampMicro), i-1, all[i-1].Holder, all[i-1].Ended.Format(time.StampMicro))
		}
		switch {
		case errors.Is(sw.Err, context.DeadlineExceeded):
			// A batch outran its lease on a loaded machine: the pass stopped, as it must, and
			// another takes the rest.
			t.Logf("pass %d stopped at its lease: %v", i, sw.Err)
		case sw.Err != nil:
			t.Errorf("pass %d failed: %v", i, sw.Err)
		}
	}
	if total != deleted {
		t.Errorf("the passes deleted %d rows, want %d", total, deleted)
	}
	t.Logf("%d passes by %d holders deleted %d rows", len(all), len(holders), total)
}

// TestRetentionHandover: a sweeper stopped in the middle of a pass (its context cancelled) keeps
// the sweeper lease until it runs out, and another consumer then takes it and deletes the rest,
// on every database.
func TestRetentionHandover(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 4)
		tbl := b.newTable(t, dbs[0], deadTable)
		createSweeps(t, b, dbs[0])
		const total = 3000
		seedSettled(t, b, dbs[0], tbl, "q", total, true, time.Now().Add(-2*retentionAge))
		// Small batches and a long budget: one pass would take them all, slowly.
		ret := &inbox.Retention{ProcessedAge: retentionAge, BatchSize: 5, Interval: 100 * time.Millisecond, Budget: 2 * time.Second}
		h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
		first := &sweeps{}
		stop := runConsumer(t, dbs[0], lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Retention: ret, Observer: first})
		waitFor(t, time.Minute, "the first sweeper deleting", func() bool { return expiredRows(t, b, dbs[1], tbl) < total })
		stop()
		killed := time.Now()
		left := expiredRows(t, b, dbs[1], tbl)
		passes := first.list()
		if len(passes) != 1 || passes[0].Err == nil || left == 0 {
			t.Fatalf("the first sweeper was not stopped in the middle of its pass: passes %+v, %d rows left", passes, left)
		}
		// The lease still stands: a take by another holder changes nothing.
		if n := takeSweepLease(t, b, dbs[1], tbl.Name); n != 0 {
			t.Fatalf("another holder took the lease at once after its holder stopped (%d rows changed)", n)
		}

		second := &sweeps{}
		runConsumer(t, dbs[2], lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Retention: ret, Observer: second})
		waitFor(t, time.Minute, "the second sweeper deleting the rest", func() bool { return expiredRows(t, b, dbs[1], tbl) == 0 })
		// A pass is reported when it ends, after its last delete: the rows can reach zero first.
		waitFor(t, 10*time.Second, "the second sweeper reporting its pass", func() bool { return len(second.list()) > 0 })
		next := second.list()
		if hold := 2 * ret.Budget; next[0].Began.Sub(killed) > hold+5*time.Second {
			t.Errorf("the second sweeper began %v after the first stopped, far past its lease of %v", next[0].Began.Sub(killed), hold)
		}
		t.Logf("the first deleted %d rows in %d statements before it stopped; the second began %v later and deleted %d", passes[0].Deleted, passes[0].Batches, next[0].Began.Sub(killed), int(total)-int(passes[0].Deleted))
	})
}

// takeSweepLease runs the sweeper lease's take for a probe holder and returns how many rows it
// changed (1: the lease had run out), then, where it took it, lets it go at once.
func takeSweepLease(t *testing.T, b backend, db *sql.DB, table string) int64 {
	t.Helper()
	var take string
	switch b.name {
	case "postgres":
		take = "UPDATE inbox_sweeps SET holder = 'probe', locked_until = now() WHERE table_name = $1 AND locked_until <= now()"
	case "sqlite":
		take = "UPDATE inbox_sweeps SET holder = 'probe' WHERE table_name = ? AND locked_until <= strftime('%Y-%m-%d %H:%M:%f', 'now')"
	default:
		take = "UPDATE inbox_sweeps SET holder = 'probe' WHERE table_name = ? AND locked_until <= UTC_TIMESTAMP(6)"
	}
	res, err := db.Exec(take, table)
	if err != nil {
		t.Fatal(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(fmt.Errorf("rows affected: %w", err))
	}
	return n
}

// TestRetentionNeedsSweepsTable: Run with retention on refuses a database without the sweeper
// leases' table, with ErrSchema naming the statement that creates it; without retention the
// same consumer runs. (A new SQLite file: the servers' databases have the table by now.)
func TestRetentionNeedsSweepsTable(t *testing.T) {
	b := onlyBackends(t, "sqlite")[0]
	db, tbl := b.openTable(t, 4, deadTable)
	h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
	cons := inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Retention: &inbox.Retention{DeadAge: time.Hour}, Logger: testLogger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cons.Run(ctx)
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), admin.RetentionSchema(b.dialect)[0]) {
		t.Fatalf("Run: %v; want ErrSchema naming %s", err, admin.RetentionSchema(b.dialect)[0])
	}
	t.Log(err)
	createSweeps(t, b, db)
	runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Retention: &inbox.Retention{DeadAge: time.Hour}})()
}
