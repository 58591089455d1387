package integration

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/pgnotify"
)

// pauseWindow bounds how long after Pause returns a handler of the paused queue may still
// start: a claim whose statement began before the pause's commit may still hand out rows (at
// most one per free worker), and their handlers start as it returns. It is generous for a
// loaded machine; every claim that begins after the commit takes nothing of the queue.
const pauseWindow = time.Second

// pausesCreate keeps the cells from creating the shared pauses table side by side (Postgres
// may refuse a CREATE TABLE IF NOT EXISTS that races another).
var pausesCreate sync.Mutex

// pauseLog records, per queue, when each handler started and how many finished.
type pauseLog struct {
	mu       sync.Mutex
	starts   map[string][]time.Time
	finished map[string]int
}

func (l *pauseLog) handler(work time.Duration) inbox.Handler {
	return inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		l.mu.Lock()
		l.starts[d.Queue] = append(l.starts[d.Queue], time.Now())
		l.mu.Unlock()
		select {
		case <-time.After(work):
		case <-ctx.Done():
		}
		l.mu.Lock()
		l.finished[d.Queue]++
		l.mu.Unlock()
		return outcome.Ack()
	})
}

// counts is how many handlers of queue started, how many of them started after at, and how
// many finished.
func (l *pauseLog) counts(queue string, at time.Time) (started, after, finished int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.starts[queue] {
		if s.After(at) {
			after++
		}
	}
	return len(l.starts[queue]), after, l.finished[queue]
}

// logLast logs when the last handler of queue started, against paused, when the queue was
// paused.
func (l *pauseLog) logLast(t *testing.T, queue string, paused time.Time) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, s := range l.starts[queue] {
		if s.After(last) {
			last = s
		}
	}
	if last.After(paused) {
		t.Logf("the last handler of queue %s started %v after Pause returned", queue, last.Sub(paused).Round(time.Millisecond))
	} else {
		t.Logf("no handler of queue %s started after Pause returned", queue)
	}
}

// TestPause: on every database and form, two consumers of queue a (each its own pool, as two
// processes), one of queue b and one of queue c drain a table whose description names a
// pauses table. Queue c is paused before any row of it exists. Once a few rows of a are done,
// a is paused (twice: idempotent) by a fifth pool: no handler of a starts later than
// pauseWindow after Pause returned (but those of claims in flight at its commit, at most one
// per worker, which are logged), the handlers in work then finish and settle, queue b drains
// to the end meanwhile, and c's rows wait; a client that refuses paused queues publishes
// nothing to a or c (ErrPaused). Paused lists a and c. Resumed, a and c drain to the end. A description whose pauses table the database lacks fails Run and Pause with ErrSchema
// naming the CREATE TABLE.
func TestPause(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		tests = append(tests, subtest{c.name(), func(t *testing.T) {
			dbs := c.b.openDBs(t, 5, 6)
			testPause(t, c, spread{b: c.b, admin: dbs[4], pools: dbs[:4]})
		}})
	}
	runConcurrently(t, 3, tests)
}

// testPause is TestPause's scenario on s, in c's form: a consumer of queue a of 2 workers on
// each of s's pools but the last two, a consumer of queue b on the one before last and of c on
// the last; s's admin pool creates, publishes, pauses and reads.
func testPause(t *testing.T, c cell, s spread) {
	b := c.b
	ctx := context.Background()
	admin, consumersA := s.admin, len(s.pools)-2
	tbl := b.newTable(t, admin, func(name string) inbox.Table {
		tbl := deadTable(name)
		tbl.Pauses = inbox.PausesTable
		return tbl
	})
	pausesCreate.Lock()
	st, err := inbox.PausesSchema(b.dialect, tbl)
	if err == nil {
		_, err = admin.ExecContext(ctx, st)
	}
	pausesCreate.Unlock()
	if err != nil {
		t.Fatalf("creating the pauses table: %v", err)
	}
	client, err := inbox.NewClient(admin, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("Pause(c) before any row", client.Pause(ctx, "c"))
	const rowsA, rowsB, rowsC = 160, 60, 5
	b.enqueue(t, admin, tbl, messages("a", rowsA)...)
	b.enqueue(t, admin, tbl, messages("b", rowsB)...)
	b.enqueue(t, admin, tbl, messages("c", rowsC)...)
	s.ready(t, tbl.Name)

	rec := &pauseLog{starts: map[string][]time.Time{}, finished: map[string]int{}}
	h := rec.handler(50 * time.Millisecond)
	workersA := 2 * consumersA
	startPauseConsumers(t, c, s, tbl, h)
	waitFor(t, time.Minute, "ten rows of queue a handled", func() bool { _, _, done := rec.counts("a", time.Time{}); return done >= 10 })
	must("Pause(a)", client.Pause(ctx, "a"))
	paused := time.Now()
	must("Pause(a) again", client.Pause(ctx, "a"))

	checkRefusingPaused(t, b, client, admin, tbl)

	processed := func(q string) int {
		return b.countRows(t, admin, tbl, b.q(t, tbl.Queue)+" = '"+q+"' AND "+b.q(t, tbl.ProcessedAt)+" IS NOT NULL")
	}
	waitFor(t, time.Minute, "queue b drained while a is paused", func() bool { return processed("b") == rowsB })
	if wait := time.Until(paused.Add(pauseWindow + 4*cellPoll)); wait > 0 {
		time.Sleep(wait)
	}
	// A claim in flight at the commit hands out at most a row per free worker of a's four;
	// one that took longer than the window is logged, more than that is a claim that began
	// after the commit.
	started, late, finished := rec.counts("a", paused.Add(pauseWindow))
	rec.logLast(t, "a", paused)
	switch {
	case late > workersA:
		t.Errorf("%d handlers of queue a started more than %v after Pause returned", late, pauseWindow)
	case late > 0:
		t.Logf("%d handlers of queue a started more than %v after Pause returned, from claims in flight at its commit", late, pauseWindow)
	}
	if finished != started {
		t.Errorf("%d handlers of queue a started and %d finished: the rows in work at the pause did not finish", started, finished)
	}
	if got := processed("a"); got != started || got >= rowsA {
		t.Errorf("%d rows of queue a processed, want the %d handled before the pause, fewer than %d", got, started, rowsA)
	}
	if got := processed("c"); got != 0 {
		t.Errorf("%d rows of queue c processed, paused before they were published", got)
	}
	checkPausedStats(t, b, admin, tbl, map[string]bool{"a": true, "b": false, "c": true, "d": false})
	list, err := client.Paused(ctx)
	must("Paused", err)
	if len(list) != 2 || list[0].Queue != "a" || list[1].Queue != "c" || list[0].Since.IsZero() {
		t.Errorf("Paused = %+v, want queues a and c with their times", list)
	}

	must("Resume(a)", client.Resume(ctx, "a"))
	must("Resume(a) again", client.Resume(ctx, "a"))
	must("Resume(c)", client.Resume(ctx, "c"))
	waitFor(t, time.Minute, "queues a and c drained once resumed", func() bool { return processed("a") == rowsA && processed("c") == rowsC })
	list, err = client.Paused(ctx)
	must("Paused after Resume", err)
	if len(list) != 0 {
		t.Errorf("Paused after Resume = %+v, want none", list)
	}

	checkPausesMissing(t, c, s, tbl, h)
}

// startPauseConsumers starts testPause's consumers: of queue a, of 2 workers, on each of s's
// pools but the last two; of b on the one before last, and of c on the last, of 1 worker.
func startPauseConsumers(t *testing.T, c cell, s spread, tbl inbox.Table, h inbox.Handler) {
	consumersA := len(s.pools) - 2
	for i, db := range s.pools {
		q, workers := "a", 2
		switch i - consumersA {
		case 0:
			q, workers = "b", 1
		case 1:
			q, workers = "c", 1
		}
		runConsumer(t, db, c.newForm(t, tbl), h, s.config(&inbox.Config{Queue: q, Workers: workers, ShutdownTimeout: 5 * time.Second}))
	}
}

// checkRefusingPaused checks that a client that refuses paused queues publishes nothing of a
// call that names one (a or c, paused), alone or in the caller's transaction, and publishes to
// the others (d).
func checkRefusingPaused(t *testing.T, b backend, client *inbox.Client[dialect.Dialect], admin *sql.DB, tbl inbox.Table) {
	t.Helper()
	ctx := context.Background()
	refusing := client.RefusingPaused()
	if err := refusing.Enqueue(ctx, inbox.Message{Queue: "d"}, inbox.Message{Queue: "a"}); !errors.Is(err, inbox.ErrPaused) || !strings.Contains(err.Error(), `queue "a"`) {
		t.Errorf("RefusingPaused().Enqueue to paused queue a: %v, want ErrPaused naming it", err)
	}
	tx, err := admin.BeginTx(ctx, nil)
	must(t, "BeginTx", err)
	if err := refusing.EnqueueTx(ctx, tx, inbox.Message{Queue: "c"}); !errors.Is(err, inbox.ErrPaused) {
		t.Errorf("RefusingPaused().EnqueueTx to paused queue c: %v, want ErrPaused", err)
	}
	if _, err := refusing.EnqueueResults(ctx, inbox.Message{Queue: "a"}); !errors.Is(err, inbox.ErrPaused) {
		t.Errorf("RefusingPaused().EnqueueResults to paused queue a: %v, want ErrPaused", err)
	}
	must(t, "Rollback", tx.Rollback())
	must(t, "RefusingPaused().Enqueue to queue d, not paused", refusing.Enqueue(ctx, inbox.Message{Queue: "d"}))
	if got := b.countRows(t, admin, tbl, b.q(t, tbl.Queue)+" = 'd'"); got != 1 {
		t.Errorf("%d rows of queue d, want the one of the call that named no paused queue", got)
	}
}

// checkPausesMissing checks that a description whose pauses table the database lacks fails
// Run and Pause with ErrSchema naming the table's CREATE TABLE.
func checkPausesMissing(t *testing.T, c cell, s spread, tbl inbox.Table, h inbox.Handler) {
	t.Helper()
	ctx := context.Background()
	missing := tbl
	missing.Pauses = "inbox_no_pauses_" + strconv.Itoa(os.Getpid())
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := inbox.NewConsumer(s.pools[len(s.pools)-1], c.newForm(t, missing), h, s.config(&inbox.Config{Queue: "a", PollInterval: cellPoll})).Run(runCtx)
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "CREATE TABLE") || !strings.Contains(err.Error(), missing.Pauses) {
		t.Errorf("Run with a missing pauses table: %v, want ErrSchema naming %s and its CREATE TABLE", err, missing.Pauses)
	}
	other, err := inbox.NewClient(s.admin, c.b.dialect, missing)
	must(t, "NewClient", err)
	if err := other.Pause(ctx, "a"); !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "CREATE TABLE") {
		t.Errorf("Pause with a missing pauses table: %v, want ErrSchema naming its CREATE TABLE", err)
	}
}

// checkPausedStats checks that admin.Stats marks the queues of want paused or not, as want
// says, and lists no other queue.
func checkPausedStats(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, want map[string]bool) {
	t.Helper()
	a, err := admin.New(db, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := a.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range stats {
		got[s.Queue] = s.Paused
	}
	if !maps.Equal(got, want) {
		t.Errorf("admin.Stats marks paused %v, want %v", got, want)
	}
}

// TestPauseOneQueueTable: a table without a queue column is one queue, paused by the empty
// name on every database and form: its rows wait while it is paused (ten polls), Stats marks
// it, and once resumed they drain.
func TestPauseOneQueueTable(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		b := c.b
		ctx := context.Background()
		dbs := b.openDBs(t, 2, 6)
		tbl := b.newTable(t, dbs[0], func(name string) inbox.Table {
			tbl := minimalTable(name)
			tbl.ProcessedAt, tbl.RetryAfter, tbl.Pauses = "processed_at", "retry_after", inbox.PausesTable
			return tbl
		})
		pausesCreate.Lock()
		st, err := inbox.PausesSchema(b.dialect, tbl)
		if err == nil {
			_, err = dbs[1].ExecContext(ctx, st)
		}
		pausesCreate.Unlock()
		if err != nil {
			t.Fatalf("creating the pauses table: %v", err)
		}
		client, err := inbox.NewClient(dbs[1], b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Pause(ctx, ""); err != nil {
			t.Fatal(err)
		}
		b.enqueue(t, dbs[1], tbl, messages("", 5)...)
		rec := &pauseLog{starts: map[string][]time.Time{}, finished: map[string]int{}}
		runConsumer(t, dbs[0], c.newForm(t, tbl), rec.handler(0), &inbox.Config{})
		time.Sleep(10 * cellPoll)
		if started, _, _ := rec.counts("", time.Time{}); started != 0 {
			t.Errorf("%d handlers started while the table's queue was paused", started)
		}
		checkPausedStats(t, b, dbs[1], tbl, map[string]bool{"": true})
		if err := client.Resume(ctx, ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the rows handled once resumed", func() bool { _, _, done := rec.counts("", time.Time{}); return done == 5 })
	})
}

// TestResumeNotifiesAConsumerOnAnotherPool: on Postgres, where the description asks for
// notifications, Resume notifies the table's channel at its commit: a consumer on another pool,
// listening through pgnotify and polling once a minute, is woken by it (its listener counts the
// wake-up) and handles the row that waited behind the pause.
func TestResumeNotifiesAConsumerOnAnotherPool(t *testing.T) {
	b := backends(t, false)[0]
	ctx := context.Background()
	pub, cons := b.open(t, 4), b.open(t, 4)
	tbl := minimalTable(tableName(t))
	tbl.Notify, tbl.Pauses = true, inbox.PausesTable
	b.createTable(t, pub, tbl)
	pausesCreate.Lock()
	st, err := inbox.PausesSchema(b.dialect, tbl)
	if err == nil {
		_, err = pub.ExecContext(ctx, st)
	}
	pausesCreate.Unlock()
	if err != nil {
		t.Fatalf("creating the pauses table: %v", err)
	}
	client, err := inbox.NewClient(pub, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Pause(ctx, ""); err != nil {
		t.Fatal(err)
	}
	rec := &pauseLog{starts: map[string][]time.Time{}, finished: map[string]int{}}
	w := &countingWaker{Waker: &pgnotify.Listener{ConnString: b.dsn}}
	runConsumer(t, cons, lease.New(b.dialect, tbl, nil), rec.handler(0), &inbox.Config{PollInterval: longPoll, Wakeups: w, Retry: inbox.RetryAtOnce})
	waitWoken(t, "the listener's first wake-up, once it listens", func() bool { return w.wakes.Load() == 1 })
	if err := client.Enqueue(ctx, inbox.Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	waitWoken(t, "the publish's wake-up", func() bool { return w.wakes.Load() == 2 })
	time.Sleep(10 * cellPoll)
	if started, _, _ := rec.counts("", time.Time{}); started != 0 {
		t.Fatalf("%d handlers started while the queue was paused", started)
	}
	if err := client.Resume(ctx, ""); err != nil {
		t.Fatal(err)
	}
	waitWoken(t, "the resume's wake-up and the row handled", func() bool {
		_, _, done := rec.counts("", time.Time{})
		return w.wakes.Load() == 3 && done == 1
	})
}
