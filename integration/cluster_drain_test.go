package integration

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// The cluster tests' consumer side: a form built by name, one consumer run per pool (each pool
// on its own server of the cluster), and a drain that counts what happened to every row. It
// goes through these few helpers only, so that the tests follow the forms' constructors when
// their shape changes.

// clusterWay is one way of consuming: a form, single deliveries or batches, in transactional
// mode or not, its statements prepared or not.
type clusterWay struct {
	form          string // "rowlock", "lease" or "advisory"
	batch         int    // 0: one row per delivery; otherwise batches of up to batch rows
	transactional bool
	unprepared    bool // Config.UnpreparedStatements
}

func (w clusterWay) String() string {
	s := w.form
	if w.batch > 0 {
		s += "-batch"
	}
	if w.transactional {
		return s + "-tx"
	}
	return s + "-plain"
}

// clusterWays lists every way: the three forms, single and batch, transactional and not.
func clusterWays(forms ...string) []clusterWay {
	if len(forms) == 0 {
		forms = []string{"rowlock", "lease", "advisory"}
	}
	var ws []clusterWay
	for _, f := range forms {
		for _, batch := range []int{0, 8} {
			for _, tx := range []bool{true, false} {
				ws = append(ws, clusterWay{form: f, batch: batch, transactional: tx})
			}
		}
	}
	return ws
}

// clusterConsumer builds a consumer of tbl on db the way w says, with lease d for the lease
// form. A batch consumer hands each row of its batch to h in turn.
func clusterConsumer(t *testing.T, b backend, db *sql.DB, w clusterWay, tbl inbox.Table, d time.Duration, h inbox.Handler, cfg *inbox.Config) *inbox.Consumer {
	t.Helper()
	cfg.Transactional, cfg.UnpreparedStatements = w.transactional, w.unprepared
	if cfg.PollInterval == 0 {
		cfg.PollInterval = cellPoll
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 5 * time.Second // a handler stuck on a stalled server gives up soon
	}
	return newConsumer(t, db, cell{b: b, form: w.form}.newFormLease(t, tbl, d), w.batch, h, cfg)
}

// runCluster runs cons until the returned stop is called (or the test ends); stop returns
// Run's error, and fails the test when Run does not return within 30 s.
func runCluster(t *testing.T, cons *inbox.Consumer) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	var (
		once sync.Once
		err  error
	)
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Error("Run did not return within 30 s of its context's end")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// tracker records every handler start and end across a drain's consumers.
type tracker struct {
	mu         sync.Mutex
	active     map[int64]int
	starts     map[int64]int
	byConsumer map[int]int
	overlapped int
}

func newTracker() *tracker {
	return &tracker{active: map[int64]int{}, starts: map[int64]int{}, byConsumer: map[int]int{}}
}

func (r *tracker) start(who int, id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[id] > 0 {
		r.overlapped++
	}
	r.active[id]++
	r.starts[id]++
	r.byConsumer[who]++
}

func (r *tracker) end(id int64) {
	r.mu.Lock()
	r.active[id]--
	r.mu.Unlock()
}

// handledBy is how many rows consumer who has started handling.
func (r *tracker) handledBy(who int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byConsumer[who]
}

func (r *tracker) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.starts {
		n += s
	}
	return n
}

// drainCounts is what a drain measured.
type drainCounts struct {
	rows       int    // rows published
	deliveries int    // handler starts
	twice      int    // rows whose handler started more than once
	overlapped int    // handler starts of a row whose handler still ran (in any consumer)
	lost       int    // rows never settled
	dupSettled int    // settlements beyond one per row (the audit trigger's rows)
	dupEffects int    // side effects committed beyond one per row
	noEffect   int    // rows settled without their side effect
	logged     int    // warnings and errors the consumers logged
	conflicts  int    // of those, the ones that name a deadlock or certification failure (1213)
	failed     string // the first error a consumer's Run returned
	took       time.Duration
}

func (c drainCounts) String() string {
	s := fmt.Sprintf("rows %d, deliveries %d, twice %d, overlapped %d, lost %d, settled twice %d, effects twice %d, no effect %d, logged %d (1213: %d), %v",
		c.rows, c.deliveries, c.twice, c.overlapped, c.lost, c.dupSettled, c.dupEffects, c.noEffect, c.logged, c.conflicts, c.took.Round(10*time.Millisecond))
	if c.failed != "" {
		s += "; Run: " + c.failed
	}
	return s
}

// drainSetup is a drain's table, its side tables, and its consumers' shared instruments.
type drainSetup struct {
	b       backend
	admin   *sql.DB
	tbl     inbox.Table
	side    string
	audit   string
	rec     *tracker
	logs    *faultLog
	started time.Time
}

// newDrain creates tbl with its side table (one row per committed side effect) and its audit
// table (one row per committed settlement, written by a trigger inside the settling
// transaction), publishes rows to it, and returns the drain's instruments.
func newDrain(t *testing.T, b backend, admin *sql.DB, rows int) *drainSetup {
	t.Helper()
	return newDrainOn(t, b, admin, fullTable(tableName(t)), rows)
}

// newDrainOn is newDrain on a table of the caller's naming.
func newDrainOn(t *testing.T, b backend, admin *sql.DB, tbl inbox.Table, rows int) *drainSetup {
	t.Helper()
	c := cell{b: b}
	s := &drainSetup{b: b, admin: admin, tbl: tbl, rec: newTracker(), logs: &faultLog{t: t}}
	s.side, s.audit = s.tbl.Name+"_side", s.tbl.Name+"_audit"
	b.createTable(t, admin, s.tbl)
	c.createSide(t, admin, s.side)
	c.createAudit(t, admin, s.tbl, s.audit)
	s.publish(t, rows)
	s.started = time.Now()
	return s
}

func (s *drainSetup) publish(t *testing.T, rows int) {
	t.Helper()
	s.b.enqueue(t, s.admin, s.tbl, messages("q", rows)...)
}

// logger is a consumer's logger: warnings and errors, into the drain's log.
func (s *drainSetup) logger() *slog.Logger {
	return s.logs.Logger(slog.LevelWarn)
}

// handler is consumer who's handler on db: it records the delivery, pauses up to pause so that
// the consumers' claims and settlements interleave, writes the row's side effect (through the
// delivery's transaction in transactional mode, on db otherwise) and acks. A side effect that
// cannot be written retries the row.
func (s *drainSetup) handler(t *testing.T, who int, db *sql.DB, pause time.Duration) inbox.Handler {
	c := cell{b: s.b}
	insert := "INSERT INTO " + c.q(t, s.side) + " (job_id, attempt) VALUES (" + c.ph(1) + ", " + c.ph(2) + ")"
	return inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		s.rec.start(who, d.ID)
		defer s.rec.end(d.ID)
		if pause > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(pause))))
		}
		if _, err := writerOf(d, db).ExecContext(ctx, insert, d.ID, d.Attempt); err != nil {
			return outcome.Retry()
		}
		return outcome.Ack()
	})
}

// wait waits until no row is left unprocessed, failing the test when none settles for limit.
func (s *drainSetup) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	switch left := s.settle(t, limit); {
	case left < 0:
		t.Fatalf("the server did not answer how many rows are left for %v", limit)
	case left > 0:
		t.Fatalf("%d rows left unprocessed, none settled for %v", left, limit)
	}
}

// settle waits until no row is left unprocessed or none has settled for limit, and returns
// how many are left, -1 when the server never answered. A count the server does not answer (a
// failover under way) is no progress.
func (s *drainSetup) settle(t *testing.T, limit time.Duration) int {
	t.Helper()
	c := cell{b: s.b}
	query := "SELECT COUNT(*) FROM " + c.q(t, s.tbl.Name) + " WHERE " + c.q(t, s.tbl.ProcessedAt) + " IS NULL"
	left, progress := -1, time.Now()
	for left != 0 && time.Since(progress) < limit {
		var n int
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := s.admin.QueryRowContext(ctx, query).Scan(&n)
		cancel()
		if err == nil && (left < 0 || n < left) {
			left, progress = n, time.Now()
		}
		if left != 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return left
}

// counts reads the drain's outcome from the tables and the tracker; the consumers must have
// stopped.
func (s *drainSetup) counts(t *testing.T) drainCounts {
	t.Helper()
	c := cell{b: s.b}
	out := drainCounts{took: time.Since(s.started)}
	settled := c.sideCounts(t, s.admin, s.audit)
	effects := c.sideCounts(t, s.admin, s.side)
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	for _, id := range c.ids(t, s.admin, s.tbl, "") {
		out.rows++
		out.deliveries += s.rec.starts[id]
		if s.rec.starts[id] > 1 {
			out.twice++
		}
		switch n := settled[id]; {
		case n == 0:
			out.lost++
		case n > 1:
			out.dupSettled += n - 1
		}
		switch e := effects[id]; {
		case e == 0 && settled[id] > 0:
			out.noEffect++
		case e > 1:
			out.dupEffects += e - 1
		}
	}
	out.overlapped = s.rec.overlapped
	text := s.logs.String()
	out.logged = strings.Count(text, "\n")
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "1213") || strings.Contains(strings.ToLower(line), "deadlock") {
			out.conflicts++
		}
	}
	return out
}

// drain runs one consumer of way w per pool (of workers workers each) on a table of rows rows,
// until every row is processed, and returns what it counted. A consumer that fails, or rows
// that stop settling for 30 s, fail the test.
func drain(t *testing.T, b backend, admin *sql.DB, pools []*sql.DB, w clusterWay, rows, workers int, lease time.Duration) drainCounts {
	t.Helper()
	got := drainUntil(t, b, admin, pools, w, rows, workers, lease, 30*time.Second)
	if got.lost > 0 || got.failed != "" {
		t.Fatalf("the drain did not complete: %s", got)
	}
	return got
}

// drainUntil is drain for a setup where consumers may fail or stall: it stops them once every
// row is processed or none has settled for patience, and reports the rows left as lost and
// the first error a Run returned.
func drainUntil(t *testing.T, b backend, admin *sql.DB, pools []*sql.DB, w clusterWay, rows, workers int, lease, patience time.Duration) drainCounts {
	t.Helper()
	return newDrain(t, b, admin, rows).run(t, pools, w, workers, lease, patience)
}

// run runs one consumer of way w per pool on the drain's table until every row is processed
// or none has settled for patience, stops them, and counts.
func (s *drainSetup) run(t *testing.T, pools []*sql.DB, w clusterWay, workers int, lease, patience time.Duration) drainCounts {
	t.Helper()
	var stops []func() error
	for i, db := range pools {
		h := s.handler(t, i, db, 2*time.Millisecond)
		cons := clusterConsumer(t, s.b, db, w, s.tbl, lease, h, &inbox.Config{Queue: "q", Workers: workers, Logger: s.logger()})
		stops = append(stops, runCluster(t, cons))
	}
	s.settle(t, patience)
	var failed string
	for _, stop := range stops {
		if err := stop(); err != nil && failed == "" {
			failed = err.Error()
		}
	}
	got := s.counts(t)
	got.failed = failed
	return got
}
