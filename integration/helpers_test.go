package integration

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// The helpers every test file shares: forms opened for a test, claims and settlements that fail
// the test on an error, the ids of deliveries, calls run side by side, waits, consumers run for
// a test (and until their table is drained), child processes, and logs a test reads. The
// database side (backends, pools, tables, publishing, queries) is in backend_test.go; the cells
// and the suites run on each are in conformance_test.go.

// openForm opens f on db for q and closes it when the test ends; an error of either fails the
// test.
func openForm[F inbox.Form](t *testing.T, f F, db *sql.DB, q inbox.Binding) F {
	t.Helper()
	if _, err := f.Open(context.Background(), db, q); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

// batchForm returns f as a batch form, failing the test when it takes no batches.
func batchForm(t testing.TB, f inbox.Form) inbox.BatchForm {
	t.Helper()
	bf, ok := f.(inbox.BatchForm)
	if !ok {
		t.Fatalf("the form %T does not implement inbox.BatchForm", f)
	}
	return bf
}

// claimTimeout bounds each claim of the helpers below: a claim that waited for a lock, rather
// than passing over the rows others hold, fails the test instead of hanging it.
const claimTimeout = 10 * time.Second

// claim claims up to max rows, failing the test on an error.
func claim(t testing.TB, f inbox.Form, max int) []*inbox.Delivery {
	t.Helper()
	return claimed(t, "Claim", f.Claim, max)
}

// claimBatch claims a batch of up to max rows, failing the test on an error.
func claimBatch(t testing.TB, f inbox.BatchForm, max int) []*inbox.Delivery {
	t.Helper()
	return claimed(t, "ClaimBatch", f.ClaimBatch, max)
}

// claimed returns what the claim call (Claim or ClaimBatch, named by what) of up to max rows
// returns within claimTimeout, failing the test on an error.
func claimed(t testing.TB, what string, call func(context.Context, int) ([]*inbox.Delivery, error), max int) []*inbox.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	ds, err := call(ctx, max)
	if err != nil {
		t.Fatalf("%s(%d): %v", what, max, err)
	}
	return ds
}

// claimN claims up to max rows and fails the test unless it gets n of them.
func claimN(t testing.TB, f inbox.Form, max, n int) []*inbox.Delivery {
	t.Helper()
	return claimedN(t, "", claim(t, f, max), n)
}

// claimBatchN claims a batch of up to max rows and fails the test unless it gets n of them.
func claimBatchN(t testing.TB, f inbox.BatchForm, max, n int) []*inbox.Delivery {
	t.Helper()
	return claimedN(t, "a batch of ", claimBatch(t, f, max), n)
}

// claimedN returns ds, failing the test unless it holds n rows; unit ("a batch of ") says what
// was claimed, for the message.
func claimedN(t testing.TB, unit string, ds []*inbox.Delivery, n int) []*inbox.Delivery {
	t.Helper()
	if len(ds) != n {
		t.Fatalf("claimed %s%d rows %v, want %d", unit, len(ds), deliveryIDs(ds), n)
	}
	return ds
}

// claimRow claims up to max rows and fails the test unless it gets row id alone, which it
// returns; why says why that row, for the message.
func claimRow(t testing.TB, f inbox.Form, max int, id int64, why string) *inbox.Delivery {
	t.Helper()
	ds := claim(t, f, max)
	if len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("claimed %v, want row %d %s", deliveryIDs(ds), id, why)
	}
	return ds[0]
}

// settle settles d with o, failing the test on an error.
func settle(t testing.TB, f inbox.Form, d *inbox.Delivery, o outcome.Outcome) {
	t.Helper()
	if err := f.Settle(context.Background(), d, o); err != nil {
		t.Fatalf("settling row %d (%s): %v", d.ID, o, err)
	}
}

// settleBatch settles the batch ds with outs, one per delivery, failing the test on an error.
func settleBatch(t testing.TB, f inbox.BatchForm, ds []*inbox.Delivery, outs ...outcome.Outcome) {
	t.Helper()
	if err := f.SettleBatch(context.Background(), ds, outs); err != nil {
		t.Fatalf("settling the batch %v (%v): %v", deliveryIDs(ds), outs, err)
	}
}

// release gives d back unsettled, failing the test on an error.
func release(t testing.TB, f inbox.Form, d *inbox.Delivery) {
	t.Helper()
	if err := f.Release(context.Background(), d); err != nil {
		t.Fatalf("releasing row %d: %v", d.ID, err)
	}
}

// releaseBatch gives the batch ds back unsettled, failing the test on an error.
func releaseBatch(t testing.TB, f inbox.BatchForm, ds []*inbox.Delivery) {
	t.Helper()
	if err := f.ReleaseBatch(context.Background(), ds); err != nil {
		t.Fatalf("releasing the batch %v: %v", deliveryIDs(ds), err)
	}
}

// repeated returns n outcomes o, the settlement of a batch whose rows all end alike.
func repeated(o outcome.Outcome, n int) []outcome.Outcome {
	outs := make([]outcome.Outcome, n)
	for i := range outs {
		outs[i] = o
	}
	return outs
}

// writerOf is where d's handler writes: the delivery's transaction in transactional mode, db
// outside it.
func writerOf(d *inbox.Delivery, db *sql.DB) inbox.Tx {
	if d.Tx != nil {
		return d.Tx
	}
	return db
}

// deliveryIDs returns the deliveries' row ids, in their order.
func deliveryIDs(ds []*inbox.Delivery) []int64 {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

// sortedIDs returns the deliveries' row ids, sorted.
func sortedIDs(ds []*inbox.Delivery) []int64 {
	ids := deliveryIDs(ds)
	slices.Sort(ids)
	return ids
}

// checkClaimed fails the test unless ds are the rows ids, in any order, each at attempt; when
// says when they were claimed ("after ReleaseBatch"), for the messages.
func checkClaimed(t testing.TB, ds []*inbox.Delivery, ids []int64, attempt int, when string) {
	t.Helper()
	if got, want := sortedIDs(ds), slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
		t.Fatalf("%s the claim got rows %v, want %v", when, got, want)
	}
	for _, d := range ds {
		if d.Attempt != attempt {
			t.Errorf("row %d %s reads attempt %d, want %d", d.ID, when, d.Attempt, attempt)
		}
	}
}

// rowCounts counts deliveries (or claims) by row, for handlers that run at once. The zero value
// counts none.
type rowCounts struct {
	mu    sync.Mutex
	byID  map[int64]int
	total int
}

// add counts one more for each of ds.
func (c *rowCounts) add(ds ...*inbox.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[int64]int{}
	}
	for _, d := range ds {
		c.byID[d.ID]++
		c.total++
	}
}

// counted returns how many were counted over every row, and how many rows were.
func (c *rowCounts) counted() (total, rows int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, len(c.byID)
}

// checkOnce fails the test unless rows rows were counted, each once; what says what was counted
// ("handled", "claimed", …).
func (c *rowCounts) checkOnce(t testing.TB, what string, rows int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.byID {
		if n != 1 {
			t.Errorf("row %d %s %d times, want once", id, what, n)
		}
	}
	if len(c.byID) != rows {
		t.Errorf("%d rows %s, want %d", len(c.byID), what, rows)
	}
}

// collector gathers what subtests running at once report, for the table their parent logs.
type collector[R any] struct {
	mu sync.Mutex
	rs []R
}

func (c *collector[R]) add(r R) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rs = append(c.rs, r)
}

// all returns what was gathered, in the order it came.
func (c *collector[R]) all() []R {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.rs)
}

// atMost calls do(0) … do(n-1), each on a goroutine of its own, up to limit at once, and returns
// once every call has.
func atMost(limit, n int, do func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			do(i)
		}()
	}
	wg.Wait()
}

// txMode names a test's mode: "tx" in transactional mode, "plain" outside it.
func txMode(transactional bool) string {
	if transactional {
		return "tx"
	}
	return "plain"
}

// eventually tests cond every 20 ms until it holds, and reports whether it did within limit.
func eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// waitFor waits until cond holds, failing the test after limit; what names the wait.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !eventually(limit, cond) {
		t.Fatalf("waited %v for %s", limit, what)
	}
}

// waitProgress waits until left reports 0, for as long as it keeps falling: it fails the test
// when left has not fallen for stall (what names what left counts). A wait so bounded holds on
// a loaded machine, where a fixed limit on the whole wait would be the machine's speed.
func waitProgress(t testing.TB, stall time.Duration, what string, left func() int) {
	t.Helper()
	n, progress := left(), time.Now()
	for n > 0 {
		if time.Since(progress) > stall {
			t.Fatalf("%d %s, none gone for %v", n, what, stall)
		}
		time.Sleep(50 * time.Millisecond)
		if m := left(); m < n {
			n, progress = m, time.Now()
		}
	}
}

// drainTable runs the consumers until tbl has no row left to process (no row at all, where it
// has no processed_at column), failing the test after limit (what names the wait), and stops
// them before it returns.
func drainTable(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, limit time.Duration, what string, cs ...*inbox.Consumer) {
	t.Helper()
	var stops []func()
	for _, c := range cs {
		stops = append(stops, startConsumer(t, c))
	}
	left := ""
	if tbl.ProcessedAt != "" {
		left = b.q(t, tbl.ProcessedAt) + " IS NULL"
	}
	waitFor(t, limit, what, func() bool { return b.countRows(t, db, tbl, left) == 0 })
	for _, stop := range stops {
		stop()
	}
}

// newConsumer builds a consumer of f on db that hands each row to h: one row per delivery, or,
// with batch > 0, in batches of up to batch rows, the rows of a batch handed to h in turn.
func newConsumer(t testing.TB, db *sql.DB, f inbox.Form, batch int, h inbox.Handler, cfg *inbox.Config) *inbox.Consumer {
	t.Helper()
	if batch == 0 {
		return inbox.NewConsumer(db, f, h, cfg)
	}
	return consumerOf(t, db, f, batch, func(ctx context.Context, ds ...*inbox.Delivery) []outcome.Outcome {
		outs := make([]outcome.Outcome, len(ds))
		for i, d := range ds {
			outs[i] = h.Handle(ctx, d)
		}
		return outs
	}, cfg)
}

// consumerOf builds a consumer of f on db whose deliveries handle settles, one outcome per row:
// one row per delivery, or, with batch > 0, batches of up to batch rows.
func consumerOf(t testing.TB, db *sql.DB, f inbox.Form, batch int, handle func(ctx context.Context, ds ...*inbox.Delivery) []outcome.Outcome, cfg *inbox.Config) *inbox.Consumer {
	t.Helper()
	if batch == 0 {
		return inbox.NewConsumer(db, f, inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			return handle(ctx, d)[0]
		}), cfg)
	}
	return inbox.NewBatchConsumer(db, batchForm(t, f), batch, inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
		return handle(ctx, ds...)
	}), cfg)
}

// startConsumer runs cons until the returned stop is called (or the test ends); stop cancels
// Run and fails the test when Run returns an error, or does not return within a minute (the
// default shutdown timeout, and 30 s more).
func startConsumer(t *testing.T, cons *inbox.Consumer) (stop func()) {
	return startConsumerWithin(t, cons, time.Minute)
}

// runConsumer runs a consumer of f on db, with the suite's poll interval and test logger where
// cfg sets none, until the returned stop is called (or the test ends); stop cancels Run and
// fails the test when Run returns an error, or does not return within 30 s beyond cfg's
// shutdown timeout (when cfg sets none, 30 s in all).
func runConsumer(t *testing.T, db *sql.DB, f inbox.Form, h inbox.Handler, cfg *inbox.Config) (stop func()) {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = cellPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	return startConsumerWithin(t, inbox.NewConsumer(db, f, h, cfg), cfg.ShutdownTimeout+30*time.Second)
}

// startConsumerWithin is startConsumer with limit for how long Run may take to return.
func startConsumerWithin(t *testing.T, cons *inbox.Consumer, limit time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(limit):
				t.Errorf("Run did not return within %v of its context's end", limit)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// testLogger sends warnings and errors to the test's log while the test runs.
func testLogger(t *testing.T) *slog.Logger {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Log(strings.TrimSpace(string(p)))
		}
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// startPiped starts cmd with its stdout to be read from the returned pipe and its stderr
// gathered in a log the test can read while cmd runs.
func startPiped(cmd *exec.Cmd) (stdout io.ReadCloser, stderr *inboxtest.Log, err error) {
	stderr = &inboxtest.Log{}
	cmd.Stderr = stderr
	if stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, nil, err
	}
	return stdout, stderr, cmd.Start()
}

// lastLines returns the last n lines of log.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// faultLog is a log a test reads that also passes each line to the test's log, for the tests
// that read a consumer's log and show it.
type faultLog struct {
	t *testing.T
	inboxtest.Log
}

func (l *faultLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return l.Log.Write(p)
}

// Logger returns a text logger of the records at level and above, written to l (and so to the
// test's log); the embedded Log's would write past l.Write.
func (l *faultLog) Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}
