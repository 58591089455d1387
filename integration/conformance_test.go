package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// cell is one database × form pair of the conformance suite, with what the form promises
// there. The suite checks each cell against its own promises, no more and no less.
type cell struct {
	b    backend
	form string // "rowlock", "lease" or "advisory"

	// atOnce: a row held by a consumer that dies (or a connection that is cut) is claimable
	// again at once. Otherwise it returns when its lease runs out.
	atOnce bool
	// crashCounts: the attempt a delivery reads counts deliveries cut off by a crash; otherwise
	// only deliveries that settled with a retry count.
	crashCounts bool
	// transactional: the form lends the handler a transaction (Config.Transactional).
	transactional bool
}

// cellLease is the lease of the lease cells: short, so that a crashed consumer's rows come back
// within the tests' patience.
const cellLease = time.Second

// cellPoll is the poll interval of the suite's consumers.
const cellPoll = 50 * time.Millisecond

// cells lists every cell: Postgres, MariaDB under the MySQL dialect and MariaDB under its own,
// each with the row lock, lease and advisory forms, and SQLite with the lease form. They come
// form by form, so that cells run side by side spread over the servers.
func cells(t *testing.T) []cell {
	var cs []cell
	bs := backends(t, true)
	for _, form := range []string{"lease", "rowlock", "advisory"} {
		for _, b := range bs {
			switch {
			case form == "lease":
				cs = append(cs, cell{b: b, form: form, atOnce: false, crashCounts: true, transactional: true})
			case b.name == "sqlite": // no row locks, no session locks
			case form == "rowlock":
				cs = append(cs, cell{b: b, form: form, atOnce: true, crashCounts: false, transactional: true})
			default:
				cs = append(cs, cell{b: b, form: form, atOnce: true, crashCounts: true, transactional: true})
			}
		}
	}
	return cs
}

// subtest is one subtest for runConcurrently.
type subtest struct {
	name string
	run  func(t *testing.T)
}

// runConcurrently runs the subtests, up to limit at once. t.Parallel would allow -parallel of
// them, which defaults to GOMAXPROCS (2 on CI's machine); these tests wait on database servers
// and child processes far more than on the CPU.
func runConcurrently(t *testing.T, limit int, tests []subtest) {
	atMost(limit, len(tests), func(i int) { t.Run(tests[i].name, tests[i].run) })
}

// forEachCell runs run on every cell, up to four at once, each as a subtest named for the cell.
func forEachCell(t *testing.T, run func(t *testing.T, c cell)) {
	var tests []subtest
	for _, c := range cells(t) {
		tests = append(tests, subtest{c.name(), func(t *testing.T) { run(t, c) }})
	}
	runConcurrently(t, 4, tests)
}

// cellTest is one test of a suite that runs on every cell.
type cellTest struct {
	name string
	run  func(t *testing.T, c cell)
}

// runSuite runs on every cell, as forEachCell does, the tests suite lists for the cell, one after
// the other, each as a subtest of the cell's named for the test.
func runSuite(t *testing.T, suite func(c cell) []cellTest) {
	forEachCell(t, func(t *testing.T, c cell) {
		for _, ct := range suite(c) {
			t.Run(ct.name, func(t *testing.T) { ct.run(t, c) })
		}
	})
}

// cellRun is what a subtest of matrix found on one cell in one variant.
type cellRun[R any] struct {
	cell, variant string // their names
	r             R
}

// matrix runs run on every cell in each variant, up to four at once, each as a subtest named
// for the cell and the variant's name, and returns what they found, sorted by cell and variant.
func matrix[V, R any](t *testing.T, variants []V, name func(V) string, run func(t *testing.T, c cell, v V) R) []cellRun[R] {
	var (
		found collector[cellRun[R]]
		tests []subtest
	)
	for _, c := range cells(t) {
		for _, v := range variants {
			tests = append(tests, subtest{c.name() + "-" + name(v), func(t *testing.T) {
				found.add(cellRun[R]{cell: c.name(), variant: name(v), r: run(t, c, v)})
			}})
		}
	}
	runConcurrently(t, 4, tests)
	runs := found.all()
	slices.SortFunc(runs, func(a, b cellRun[R]) int { return strings.Compare(a.cell+a.variant, b.cell+b.variant) })
	return runs
}

func (c cell) name() string { return c.b.name + "-" + c.form }

// newForm builds the cell's form over tbl (each consumer needs its own).
func (c cell) newForm(t testing.TB, tbl inbox.Table) inbox.Form {
	return c.newFormLease(t, tbl, cellLease)
}

// newFormLease builds the cell's form, with lease d where the form is the lease form.
func (c cell) newFormLease(t testing.TB, tbl inbox.Table, d time.Duration) inbox.Form {
	t.Helper()
	switch c.form {
	case "rowlock":
		return rowlock.New(c.b.dialect.(rowlock.Dialect), tbl)
	case "lease":
		return lease.New(c.b.dialect, tbl, &lease.Config{Lease: d})
	case "advisory":
		// The default key: one per row, the table's name as far as a key's text carries it.
		return advisory.New(c.b.dialect.(advisory.Dialect), tbl, nil)
	}
	t.Fatalf("unknown form %q", c.form)
	return nil
}

// returnBound is how long after a crash a held row may take to be claimable again, by the
// cell's promise, plus a poll interval; slack covers a slow machine.
func (c cell) returnBound(slack time.Duration) time.Duration {
	if c.atOnce {
		return cellPoll + slack
	}
	return cellLease + cellPoll + slack
}

// dsn returns a DSN of the cell's database: the backend's, or a new SQLite file of the test's.
func (c cell) dsn(t *testing.T) string { return c.b.testDSN(t) }

// openDBs opens n pools on one database of the cell's backend (one SQLite file for all), as n
// processes would have, each of pool connections.
func (c cell) openDBs(t *testing.T, n, pool int) []*sql.DB { return c.b.openDBs(t, n, pool) }

// openDSN opens a pool of pool connections on dsn, closed when the test ends.
func (c cell) openDSN(t *testing.T, dsn string, pool int) *sql.DB { return c.b.openDSN(t, dsn, pool) }

// q quotes an identifier for the cell's database.
func (c cell) q(t testing.TB, ident string) string { return c.b.q(t, ident) }

// ph is the n-th statement parameter of the cell's database.
func (c cell) ph(n int) string { return c.b.dialect.Placeholder(n) }

// publish publishes msgs to tbl, failing the test on an error.
func (c cell) publish(t testing.TB, db *sql.DB, tbl inbox.Table, msgs ...inbox.Message) {
	t.Helper()
	c.b.enqueue(t, db, tbl, msgs...)
}

// publishEach publishes to tbl one message of queue q per payload, each by its own Enqueue, and
// returns the ids of the table's rows in id order (the table held none before).
func (c cell) publishEach(t testing.TB, db *sql.DB, tbl inbox.Table, q string, payloads ...string) []int64 {
	t.Helper()
	for _, p := range payloads {
		c.publish(t, db, tbl, inbox.Message{Queue: q, Payload: []byte(p)})
	}
	return c.ids(t, db, tbl, "")
}

// createSide creates the table a transactional handler writes its side effect to: one row per
// handled delivery, keyed by the job's id and with no unique key, so that a duplicate shows.
func (c cell) createSide(t *testing.T, db *sql.DB, name string) {
	t.Helper()
	c.b.scratchTable(t, db, name, "job_id BIGINT NOT NULL, attempt INT NOT NULL")
}

// sideCounts returns, per job id, how many side rows the handlers committed.
func (c cell) sideCounts(t testing.TB, db *sql.DB, side string) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	var id int64
	var n int
	forRows(t, db, "SELECT job_id, COUNT(*) FROM "+c.q(t, side)+" GROUP BY job_id", nil, func() { out[id] = n }, &id, &n)
	return out
}

// ids returns the ids of the table's rows that match where, in id order.
func (c cell) ids(t testing.TB, db *sql.DB, tbl inbox.Table, where string) []int64 {
	t.Helper()
	query := "SELECT " + c.q(t, tbl.ID) + " FROM " + c.q(t, tbl.Name)
	if where != "" {
		query += " WHERE " + where
	}
	return column[int64](t, db, query+" ORDER BY "+c.q(t, tbl.ID))
}

// delivered records the deliveries a test's handlers saw.
type delivered struct {
	mu     sync.Mutex
	byID   map[int64][]seen
	order  []int64
	active map[int64]bool
	errs   []string
}

type seen struct {
	attempt int
	at      time.Time
	group   string
}

func newDelivered() *delivered {
	return &delivered{byID: map[int64][]seen{}, active: map[int64]bool{}}
}

// start records d's delivery and reports a second delivery of a row whose handler still runs.
func (r *delivered) start(d *inbox.Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[d.ID] {
		r.errs = append(r.errs, fmt.Sprintf("row %d delivered while its handler still ran", d.ID))
	}
	r.active[d.ID] = true
	r.byID[d.ID] = append(r.byID[d.ID], seen{attempt: d.Attempt, at: time.Now(), group: d.Queue})
	r.order = append(r.order, d.ID)
}

func (r *delivered) end(d *inbox.Delivery) {
	r.mu.Lock()
	delete(r.active, d.ID)
	r.mu.Unlock()
}

func (r *delivered) get(id int64) []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byID[id])
}

func (r *delivered) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

func (r *delivered) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
}

// TestConformance runs one suite on every cell: each database with each form it runs.
func TestConformance(t *testing.T) {
	runSuite(t, func(c cell) []cellTest {
		tests := []cellTest{
			{"exclusivity", conformExclusivity},
			{"outcomes", conformOutcomes},
			{"attempts", conformAttempts},
			{"delete", conformDelete},
			{"groups", conformGroups},
			{"priority", conformPriority},
		}
		if c.transactional {
			tests = append(tests, cellTest{"transactional", conformTransactional})
		}
		return append(tests, cellTest{"shutdown", conformShutdown})
	})
}

// conformExclusivity: three consumers of four workers each drain 1,000 rows; every row is
// handled exactly once and no row is handed to two handlers at once.
//
// The lease form promises this only while every lease holds, and the consumer does not extend a
// lease while its settlement waits: on SQLite, three pools contending for the one write lock
// (under -race) kept settlements waiting past a 1 s lease, and a few rows were claimed again
// and handled twice (each after a "lease lost" warning), which the form allows. So this test
// gives the lease form a lease no settlement outwaits.
func conformExclusivity(t *testing.T, c cell) {
	const rows = 1000
	dbs := c.openDBs(t, 3, 6)
	tbl := c.b.newTable(t, dbs[0], fullTable)
	msgs := make([]inbox.Message, rows)
	for i := range msgs {
		msgs[i] = inbox.Message{Queue: "q", Payload: []byte(fmt.Sprint(i))}
	}
	c.publish(t, dbs[0], tbl, msgs...)

	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		if rand.IntN(8) == 0 {
			time.Sleep(time.Millisecond) // let claims and settlements of other workers interleave
		}
		return outcome.Ack()
	})
	for _, db := range dbs {
		runConsumer(t, db, c.newFormLease(t, tbl, 30*time.Second), h, &inbox.Config{Queue: "q", Workers: 4})
	}
	waitFor(t, 2*time.Minute, "the rows to be drained", func() bool {
		return len(c.ids(t, dbs[0], tbl, c.q(t, tbl.ProcessedAt)+" IS NULL")) == 0
	})
	rec.check(t)
	all := c.ids(t, dbs[0], tbl, "")
	if len(all) != rows {
		t.Fatalf("%d rows in the table, want %d", len(all), rows)
	}
	for _, id := range all {
		if n := len(rec.get(id)); n != 1 {
			t.Errorf("row %d handled %d times, want once", id, n)
		}
	}
	if n := rec.count(); n != rows {
		t.Errorf("%d deliveries, want %d", n, rows)
	}
}

// conformOutcomes: Ack and Drop stamp processed_at, Retry delivers again with the next
// attempt, RetryAfter hides the row until it is due.
func conformOutcomes(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	names := []string{"ack", "drop", "retry", "later"}
	ids := c.publishEach(t, db, tbl, "q", names...)
	byName := map[string]int64{}
	for i, n := range names {
		byName[n] = ids[i]
	}
	const delay = 400 * time.Millisecond
	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		switch string(d.Payload) {
		case "ack":
			return outcome.Ack()
		case "drop":
			return outcome.Drop()
		case "retry":
			if d.Attempt == 1 {
				return outcome.Retry()
			}
		case "later":
			if d.Attempt == 1 {
				return outcome.RetryAfter(delay)
			}
		}
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Workers: 2})
	processed := c.q(t, tbl.ProcessedAt) + " IS NOT NULL"
	waitFor(t, 20*time.Second, "every row to settle", func() bool { return len(c.ids(t, db, tbl, processed)) == len(names) })
	stop()
	rec.check(t)
	want := map[string][]int{"ack": {1}, "drop": {1}, "retry": {1, 2}, "later": {1, 2}}
	for name, attempts := range want {
		var got []int
		for _, s := range rec.get(byName[name]) {
			got = append(got, s.attempt)
		}
		if !slices.Equal(got, attempts) {
			t.Errorf("row %q delivered with attempts %v, want %v", name, got, attempts)
		}
	}
	if s := rec.get(byName["later"]); len(s) == 2 {
		if gap := s[1].at.Sub(s[0].at); gap < delay {
			t.Errorf("RetryAfter(%v) delivered the row again after %v", delay, gap)
		}
	}
	// A Retry waits by the retry policy, so it sets retry_after too; Ack and Drop leave it.
	if n := len(c.ids(t, db, tbl, c.q(t, tbl.RetryAfter)+" IS NOT NULL")); n != 2 {
		t.Errorf("%d rows with retry_after set, want 2 (the Retry row, by the policy, and the RetryAfter row)", n)
	}
}

// conformAttempts: each Retry counts one more attempt; a table without an attempt column
// reads 0 on every delivery.
func conformAttempts(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	c.publish(t, db, tbl, inbox.Message{Queue: "q"})
	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		if d.Attempt < 4 {
			return outcome.Retry()
		}
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
	waitFor(t, 20*time.Second, "the row to settle", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
	})
	stop()
	id := c.ids(t, db, tbl, "")[0]
	var got []int
	for _, s := range rec.get(id) {
		got = append(got, s.attempt)
	}
	if want := []int{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("attempts %v, want %v", got, want)
	}
}

// conformDelete: without processed_at, Ack and Drop delete the row; without an attempt
// column, a Retry still delivers the row again, reading attempt 0.
func conformDelete(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, minimalTable)
	for _, n := range []string{"ack", "drop", "retry"} {
		c.publish(t, db, tbl, inbox.Message{Payload: []byte(n)})
	}
	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		if d.Attempt != 0 {
			t.Errorf("row %d: attempt %d on a table without an attempt column, want 0", d.ID, d.Attempt)
		}
		switch string(d.Payload) {
		case "drop":
			return outcome.Drop()
		case "retry":
			if len(rec.get(d.ID)) == 1 {
				return outcome.Retry()
			}
		}
		return outcome.Ack()
	})
	// No retry_after column to delay a retry in: a retry at once is the table's only choice.
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Retry: inbox.RetryAtOnce})
	waitFor(t, 20*time.Second, "every row to be deleted", func() bool { return len(c.ids(t, db, tbl, "")) == 0 })
	stop()
	rec.check(t)
	if n := rec.count(); n != 4 {
		t.Errorf("%d deliveries, want 4 (the retried row twice)", n)
	}
}

// conformGroups: a consumer claims only its queue's rows.
func conformGroups(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	for i := range 8 {
		c.publish(t, db, tbl, inbox.Message{Queue: []string{"a", "b"}[i%2]})
	}
	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		return outcome.Ack()
	})
	grp := c.q(t, tbl.Queue)
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "a", Workers: 2})
	waitFor(t, 20*time.Second, "queue a to be drained", func() bool {
		return len(c.ids(t, db, tbl, grp+" = 'a' AND "+c.q(t, tbl.ProcessedAt)+" IS NULL")) == 0
	})
	time.Sleep(3 * cellPoll) // claims that would take b's rows have had their chance
	stop()
	if got := c.ids(t, db, tbl, grp+" = 'b' AND "+c.q(t, tbl.ProcessedAt)+" IS NULL"); len(got) != 4 {
		t.Errorf("%d of queue b's 4 rows left unprocessed by queue a's consumer, want 4", len(got))
	}
	for _, id := range c.ids(t, db, tbl, grp+" = 'a'") {
		s := rec.get(id)
		if len(s) != 1 || s[0].group != "a" {
			t.Errorf("queue a's row %d: deliveries %+v, want one in group a", id, s)
		}
	}
	if n := rec.count(); n != 4 {
		t.Errorf("queue a's consumer handled %d rows, want its 4", n)
	}
}

// conformPriority: one worker takes rows in priority order, smaller first, then by id.
func conformPriority(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	prios := []int{3, 1, 2, 1, 0, 3, 2, 0, -1, 5}
	var msgs []inbox.Message
	for _, p := range prios {
		msgs = append(msgs, inbox.Message{Queue: "q", Priority: p})
	}
	c.publish(t, db, tbl, msgs...)
	ids := c.ids(t, db, tbl, "")
	type row struct {
		id   int64
		prio int
	}
	var want []row
	for i, id := range ids {
		want = append(want, row{id, prios[i]})
	}
	slices.SortStableFunc(want, func(a, b row) int { return a.prio - b.prio })
	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Workers: 1})
	waitFor(t, 20*time.Second, "every row to settle", func() bool { return rec.count() == len(prios) })
	stop()
	rec.mu.Lock()
	got := slices.Clone(rec.order)
	rec.mu.Unlock()
	var wantIDs []int64
	for _, r := range want {
		wantIDs = append(wantIDs, r.id)
	}
	if !slices.Equal(got, wantIDs) {
		t.Errorf("handled in order %v, want %v (priorities %v by id)", got, wantIDs, prios)
	}
}

// conformTransactional: the handler's write through d.Tx commits with an Ack and is rolled
// back by a Retry and a Drop, which still settle the row.
func conformTransactional(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	side := tbl.Name + "_side"
	c.createSide(t, db, side)
	const rows = 9
	for range rows {
		c.publish(t, db, tbl, inbox.Message{Queue: "q"})
	}
	ids := c.ids(t, db, tbl, "")
	kind := map[int64]string{}
	for i, id := range ids {
		kind[id] = []string{"ack", "retry", "drop"}[i%3]
	}
	insert := "INSERT INTO " + c.q(t, side) + " (job_id, attempt) VALUES (" + c.ph(1) + ", " + c.ph(2) + ")"
	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		if d.Tx == nil {
			t.Errorf("row %d: no transaction in transactional mode", d.ID)
			return outcome.Drop()
		}
		if _, err := d.Tx.ExecContext(ctx, insert, d.ID, d.Attempt); err != nil {
			t.Errorf("row %d: writing through the delivery's transaction: %v", d.ID, err)
			return outcome.Retry()
		}
		// The handler ends with a read: where the guard asks the server whether the
		// transaction outlived rows read (MariaDB, SQLite), the answer must let it settle.
		var written int
		if err := d.Tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+c.q(t, side)+" WHERE job_id = "+c.ph(1), d.ID).Scan(&written); err != nil || written != 1 {
			t.Errorf("row %d: reading its write back through the delivery's transaction: %d rows, %v", d.ID, written, err)
			return outcome.Retry()
		}
		switch kind[d.ID] {
		case "retry":
			if d.Attempt == 1 {
				return outcome.Retry()
			}
		case "drop":
			return outcome.Drop()
		}
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Workers: 3, Transactional: true})
	waitFor(t, 20*time.Second, "every row to settle", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == rows
	})
	stop()
	rec.check(t)
	for _, id := range ids {
		got := column[int](t, db, "SELECT attempt FROM "+c.q(t, side)+" WHERE job_id = "+c.ph(1), id)
		var want []int
		switch kind[id] {
		case "ack":
			want = []int{1}
		case "retry":
			want = []int{2} // the first delivery's write was rolled back with its Retry
		}
		if !slices.Equal(got, want) {
			t.Errorf("row %d (%s): side rows with attempts %v, want %v", id, kind[id], got, want)
		}
	}
}

// conformShutdown: a handler that never returns is abandoned once the shutdown timeout runs
// out, Run returns, and the row goes back by the form's rule: claimable at once, its attempt
// counted or not as the form says.
func conformShutdown(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	c.publish(t, db, tbl, inbox.Message{Queue: "q"})

	started := make(chan struct{})
	never := make(chan struct{})
	t.Cleanup(func() { close(never) }) // let the abandoned handler's goroutine end with the test
	var once sync.Once
	stuck := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		once.Do(func() { close(started) })
		<-never // deaf to ctx: this handler does not return
		return outcome.Ack()
	})
	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- inbox.NewConsumer(db, c.newForm(t, tbl), stuck, &inbox.Config{
			Queue: "q", PollInterval: cellPoll, ShutdownTimeout: timeout, Logger: testLogger(t),
		}).Run(ctx)
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the row was not delivered within 20 s")
	}
	cancel()
	stopped := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(timeout + 20*time.Second):
		t.Fatalf("Run did not return with a handler stuck past its shutdown timeout of %v", timeout)
	}
	if took := time.Since(stopped); took < timeout {
		t.Errorf("Run returned %v after its context ended, before the shutdown timeout of %v", took, timeout)
	}
	returned := time.Now()

	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
	waitFor(t, 20*time.Second, "the abandoned row to be delivered again", func() bool { return rec.count() == 1 })
	stop()
	id := c.ids(t, db, tbl, "")[0]
	s := rec.get(id)
	// Giving a row back at shutdown is a release, not a crash: every form makes the row
	// claimable at once (the lease form clears its lease).
	if after := s[0].at.Sub(returned); after > cellPoll+time.Second {
		t.Errorf("the abandoned row came back %v after Run returned, want at once", after)
	}
	want := 1
	if c.crashCounts {
		want = 2
	}
	if s[0].attempt != want {
		t.Errorf("the abandoned row was delivered again with attempt %d, want %d", s[0].attempt, want)
	}
}
