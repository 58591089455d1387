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
	"github.com/sqlinbox/inbox/dialect"
)

// Jobs by kind (inbox.Kinds, issue 24) on every database and form: rows of many kinds share a
// table, and a consumer claims, retries and kills the rows of its own kinds alone, each under
// its kind's options.

// The kinds of the tests' jobs. Each carries a number, so that a row is known by its
// arguments as well as by its id.
type (
	alphaJob struct{ N int }
	betaJob  struct{ N int }
	gammaJob struct{ N int } // no consumer runs it
	// limitedJob dies at its second attempt, retried at once between the two.
	limitedJob struct{ N int }
	// plainJob takes the consumer's options.
	plainJob struct{ N int }
	// routedJob is published to queue "other" at priority 7.
	routedJob struct{ N int }
	// timedJob's handler calls are bounded by 300 ms.
	timedJob struct{ N int }
)

func (alphaJob) Kind() string   { return "alpha" }
func (betaJob) Kind() string    { return "beta" }
func (gammaJob) Kind() string   { return "gamma" }
func (limitedJob) Kind() string { return "limited" }
func (plainJob) Kind() string   { return "plain" }
func (routedJob) Kind() string  { return "routed" }
func (timedJob) Kind() string   { return "timed" }

func (limitedJob) KindOptions() inbox.KindOptions {
	return inbox.KindOptions{MaxAttempts: 2, Retry: inbox.RetryAtOnce}
}

func (routedJob) KindOptions() inbox.KindOptions {
	return inbox.KindOptions{Queue: "other", Priority: 7}
}

// timedBound is timedJob's handler timeout.
const timedBound = 300 * time.Millisecond

func (timedJob) KindOptions() inbox.KindOptions { return inbox.KindOptions{Timeout: timedBound} }

// kindLog records what a consumer's handlers were handed: each delivery's row, kind and
// attempt.
type kindLog struct {
	mu    sync.Mutex
	seen  []kindSeen
	byRow map[int64]int // deliveries of each row
}

type kindSeen struct {
	id      int64
	kind    string
	attempt int
}

func (l *kindLog) add(d *inbox.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byRow == nil {
		l.byRow = map[int64]int{}
	}
	l.seen = append(l.seen, kindSeen{d.ID, d.Kind, d.Attempt})
	l.byRow[d.ID]++
}

// kinds returns the kinds delivered, each once, in name order.
func (l *kindLog) kinds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.seen {
		if !slices.Contains(out, s.kind) {
			out = append(out, s.kind)
		}
	}
	slices.Sort(out)
	return out
}

// rows returns the rows delivered, each once, in id order.
func (l *kindLog) rows() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for id := range l.byRow {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// deliveries returns how many times row id was delivered.
func (l *kindLog) deliveries(id int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byRow[id]
}

// kindClient is the cell's client of tbl on db.
func (c cell) kindClient(t *testing.T, db *sql.DB, tbl inbox.Table) *inbox.Client[dialect.Dialect] {
	t.Helper()
	client, err := inbox.NewClient(db, c.b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// ofKind returns the ids of tbl's rows of kind k that match where (none: all), in id order.
func (c cell) ofKind(t *testing.T, db *sql.DB, tbl inbox.Table, k, where string) []int64 {
	t.Helper()
	cond := c.q(t, tbl.Kind) + " = '" + k + "'"
	if where != "" {
		cond += " AND " + where
	}
	return c.ids(t, db, tbl, cond)
}

// checkUntouched checks that tbl's rows of kind k, want of them, were never claimed, retried
// or killed: every one at attempt 0, not processed, not dead, without an error or a delay.
func (c cell) checkUntouched(t *testing.T, db *sql.DB, tbl inbox.Table, k string, want int) {
	t.Helper()
	all := c.ofKind(t, db, tbl, k, "")
	untouched := c.ofKind(t, db, tbl, k, c.q(t, tbl.Attempt)+" = 0 AND "+c.q(t, tbl.ProcessedAt)+" IS NULL AND "+
		c.q(t, tbl.DeadAt)+" IS NULL AND "+c.q(t, tbl.LastError)+" IS NULL AND "+c.q(t, tbl.RetryAfter)+" IS NULL")
	if len(all) != want || !slices.Equal(all, untouched) {
		t.Fatalf("rows of kind %q: %d, of which %d untouched (%v of %v); want %d, all untouched", k, len(all), len(untouched), untouched, all, want)
	}
}

// mixedJobs returns n jobs of kinds alpha, beta and gamma in turn, numbered from first.
func mixedJobs(first, n int) []inbox.Message {
	msgs := make([]inbox.Message, n)
	for i := range msgs {
		switch i % 3 {
		case 0:
			msgs[i] = inbox.Job(alphaJob{first + i})
		case 1:
			msgs[i] = inbox.Job(betaJob{first + i})
		default:
			msgs[i] = inbox.Job(gammaJob{first + i})
		}
	}
	return msgs
}

// TestKindsKeepToTheirRows: two consumers of one table, one running kind alpha and the other
// beta, over rows of alpha, beta and gamma (which nobody runs), published in one call. While
// the beta consumer is stopped, the alpha consumer runs every alpha row (failing each once, so
// that it retries them too) and leaves the beta and gamma rows as published; then both run
// over a second batch, published in the caller's transaction (a first one rolled back lands
// nothing), and each is handed the rows of its kind alone, each once more than it failed; the
// gamma rows are never touched.
func TestKindsKeepToTheirRows(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		ctx := context.Background()
		// A pool per consumer, as two processes would have: a process runs one consumer of a
		// queue (ErrAlreadyConsuming), whatever kinds each runs.
		dbs := c.openDBs(t, 2, 8)
		db, dbB := dbs[0], dbs[1]
		tbl := c.b.newTable(t, db, kindTable)
		client := c.kindClient(t, db, tbl)
		var logA, logB kindLog
		var alpha, beta inbox.Kinds
		inbox.Handle(&alpha, func(ctx context.Context, d *inbox.Delivery, a alphaJob) error {
			logA.add(d)
			if d.Attempt == 1 {
				return fmt.Errorf("alpha %d fails its first attempt", a.N)
			}
			return nil
		})
		inbox.Handle(&beta, func(ctx context.Context, d *inbox.Delivery, b betaJob) error {
			logB.add(d)
			if d.Attempt == 1 && b.N%2 == 0 {
				return fmt.Errorf("beta %d fails its first attempt", b.N)
			}
			return nil
		})
		cfg := func() *inbox.Config { return &inbox.Config{Retry: inbox.RetryAtOnce, Workers: 2} }

		if err := client.Enqueue(ctx, mixedJobs(0, 30)...); err != nil {
			t.Fatal(err)
		}
		stopA := runConsumer(t, db, c.newForm(t, tbl), &alpha, cfg())
		processed := c.q(t, tbl.ProcessedAt) + " IS NOT NULL"
		waitFor(t, 30*time.Second, "the alpha rows processed", func() bool { return len(c.ofKind(t, db, tbl, "alpha", processed)) == 10 })
		time.Sleep(4 * cellPoll) // the alpha consumer polls on, with only rows of other kinds left
		c.checkUntouched(t, db, tbl, "beta", 10)
		c.checkUntouched(t, db, tbl, "gamma", 10)
		if got := logA.kinds(); !slices.Equal(got, []string{"alpha"}) {
			t.Fatalf("the alpha consumer was handed kinds %v", got)
		}
		for _, id := range c.ofKind(t, db, tbl, "alpha", "") {
			if n := logA.deliveries(id); n != 2 {
				t.Errorf("alpha row %d delivered %d times, want 2 (a failure, then an ack)", id, n)
			}
		}

		c.publishInTx(t, db, tbl, client, mixedJobs(30, 9))
		for _, k := range []string{"alpha", "beta", "gamma"} {
			if n := len(c.ofKind(t, db, tbl, k, "")); n != 13 {
				t.Fatalf("%d rows of kind %q after a batch rolled back and one committed, want 13", n, k)
			}
		}

		stopB := runConsumer(t, dbB, c.newForm(t, tbl), &beta, cfg())
		waitFor(t, 30*time.Second, "the alpha and beta rows processed", func() bool {
			return len(c.ofKind(t, db, tbl, "alpha", processed)) == 13 && len(c.ofKind(t, db, tbl, "beta", processed)) == 13
		})
		time.Sleep(4 * cellPoll)
		stopA()
		stopB()
		c.checkUntouched(t, db, tbl, "gamma", 13)
		c.checkHandedItsKind(t, db, tbl, &logA, "alpha")
		c.checkHandedItsKind(t, db, tbl, &logB, "beta")
		twice := 0
		for _, id := range logB.rows() {
			if logB.deliveries(id) == 2 {
				twice++
			}
		}
		if twice != 6 {
			t.Errorf("%d beta rows delivered twice, want the 6 that failed once", twice)
		}
	})
}

// publishInTx publishes msgs in a transaction of the caller's that rolls back, which lands
// none of them, then in one that commits.
func (c cell) publishInTx(t *testing.T, db *sql.DB, tbl inbox.Table, client *inbox.Client[dialect.Dialect], msgs []inbox.Message) {
	t.Helper()
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.EnqueueTx(ctx, tx, msgs...); err != nil {
			t.Fatal(err)
		}
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkHandedItsKind checks that the consumer whose handlers log recorded was handed rows of
// kind alone, and every one of them.
func (c cell) checkHandedItsKind(t *testing.T, db *sql.DB, tbl inbox.Table, log *kindLog, kind string) {
	t.Helper()
	if got := log.kinds(); !slices.Equal(got, []string{kind}) {
		t.Errorf("the %s consumer was handed kinds %v", kind, got)
	}
	if got, want := log.rows(), c.ofKind(t, db, tbl, kind, ""); !slices.Equal(got, want) {
		t.Errorf("the %s consumer was handed rows %v, want its kind's %v", kind, got, want)
	}
}

// kindOptionsRun is what the handlers of TestKindOptionsApply saw.
type kindOptionsRun struct {
	log kindLog

	mu        sync.Mutex
	plainDL   []bool          // whether each plain handler call had a deadline
	timedLeft []time.Duration // the time each timed handler call had left at its start
	timedRan  []time.Duration // how long each timed handler call ran, ended by its deadline
}

// TestKindOptionsApply: each kind's options replace the consumer's for its rows. The consumer
// allows 5 attempts, waits an hour between them and bounds no handler call; a limited row (2
// attempts, retried at once) that always fails dies at its second attempt within seconds,
// while a plain row that fails once waits its hour; a timed handler call is bounded by 300 ms,
// a plain one not at all; a routed job is published to queue "other" at priority 7, which the
// consumer of the default queue leaves to the consumer of "other".
func TestKindOptionsApply(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		ctx := context.Background()
		db, tbl := c.b.openTable(t, 0, kindTable)
		client := c.kindClient(t, db, tbl)
		var r kindOptionsRun
		var kinds, other inbox.Kinds
		inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, _ limitedJob) error {
			r.log.add(d)
			return errors.New("limited always fails")
		})
		inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, _ plainJob) error {
			r.log.add(d)
			_, ok := ctx.Deadline()
			r.mu.Lock()
			r.plainDL = append(r.plainDL, ok)
			r.mu.Unlock()
			return errors.New("plain fails")
		})
		inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, _ timedJob) error {
			r.log.add(d)
			start := time.Now()
			left := time.Duration(-1)
			if dl, ok := ctx.Deadline(); ok {
				left = time.Until(dl)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			r.mu.Lock()
			r.timedLeft = append(r.timedLeft, left)
			r.timedRan = append(r.timedRan, time.Since(start))
			r.mu.Unlock()
			return nil
		})
		inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, _ routedJob) error {
			t.Errorf("the consumer of the default queue was handed routed row %d", d.ID)
			return nil
		})
		var routed kindLog
		inbox.Handle(&other, func(ctx context.Context, d *inbox.Delivery, _ routedJob) error {
			routed.add(d)
			if d.Queue != "other" {
				t.Errorf("routed row %d delivered in queue %q, want other", d.ID, d.Queue)
			}
			return nil
		})

		if err := client.Enqueue(ctx, inbox.Job(limitedJob{1}), inbox.Job(plainJob{2}), inbox.Job(timedJob{3}), inbox.Job(routedJob{4})); err != nil {
			t.Fatal(err)
		}
		// Publishing: a routed job in its kind's queue at its priority, the others in the
		// default queue at priority 0.
		grp, prio := c.q(t, tbl.Queue), c.q(t, tbl.Priority)
		if got := c.ofKind(t, db, tbl, "routed", grp+" = 'other' AND "+prio+" = 7"); len(got) != 1 {
			t.Fatalf("routed rows in queue other at priority 7: %v, want one", got)
		}
		if n := c.b.countRows(t, db, tbl, grp+" = '' AND "+prio+" = 0"); n != 3 {
			t.Fatalf("%d rows in the default queue at priority 0, want 3", n)
		}

		cfg := &inbox.Config{MaxAttempts: 5, Retry: inbox.ExponentialBackoff{Base: time.Hour, Max: time.Hour}, HandlerTimeout: -1}
		stop := runConsumer(t, db, c.newForm(t, tbl), &kinds, cfg)
		dead := c.q(t, tbl.DeadAt) + " IS NOT NULL"
		waitFor(t, 30*time.Second, "the limited row dead", func() bool { return len(c.ofKind(t, db, tbl, "limited", dead)) == 1 })
		waitFor(t, 30*time.Second, "the plain and timed rows handled", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return len(r.plainDL) > 0 && len(r.timedRan) > 0
		})
		time.Sleep(4 * cellPoll)
		stop()
		stopOther := runConsumer(t, db, c.newForm(t, tbl), &other, &inbox.Config{Queue: "other"})
		waitFor(t, 30*time.Second, "the routed row processed", func() bool {
			return len(c.ofKind(t, db, tbl, "routed", c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
		})
		stopOther()

		// The limited row: two deliveries (its own limit, not the consumer's 5), the second at
		// once (its own retry policy, not the consumer's hour), then dead at attempt 2.
		limited := c.ofKind(t, db, tbl, "limited", dead+" AND "+c.q(t, tbl.Attempt)+" = 2")
		if len(limited) != 1 || r.log.deliveries(limited[0]) != 2 {
			t.Fatalf("limited rows dead at attempt 2: %v; want one, delivered twice", limited)
		}
		// The plain row: one delivery, then a wait of the consumer's hour, alive.
		plain := c.ofKind(t, db, tbl, "plain", c.q(t, tbl.Attempt)+" = 1 AND "+c.q(t, tbl.RetryAfter)+" IS NOT NULL AND "+c.q(t, tbl.DeadAt)+" IS NULL")
		if len(plain) != 1 || r.log.deliveries(plain[0]) != 1 {
			t.Fatalf("plain rows at attempt 1, delayed and alive: %v; want one, delivered once", plain)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if slices.Contains(r.plainDL, true) {
			t.Errorf("a plain handler call had a deadline; the consumer bounds none")
		}
		for i, left := range r.timedLeft {
			if left <= 0 || left > timedBound {
				t.Errorf("timed call %d started with %v left, want at most %v", i, left, timedBound)
			}
			if ran := r.timedRan[i]; ran > timedBound+2*time.Second {
				t.Errorf("timed call %d ran %v, past its bound of %v", i, ran, timedBound)
			}
		}
		if got := routed.rows(); len(got) != 1 {
			t.Errorf("the consumer of queue other was handed rows %v, want the routed row", got)
		}
	})
}

// TestSchemaOfKinds: the table admin.Schema creates for a description with a kind column passes
// its check and is drained by a consumer of kinds on every database; on MySQL and MariaDB,
// whose claim index ends with the kind, the check finds an index without it wanting, names it,
// and its fix (one ALTER TABLE) makes the check pass.
func TestSchemaOfKinds(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := kindTable(tableName(t))
		tbl.LockedUntil = "locked_until"
		a := createAdminTable(t, b, db, tbl)
		check := func() admin.Check {
			t.Helper()
			c, err := a.Check(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		if c := check(); !c.OK() {
			t.Fatalf("the table admin.Schema created does not pass its check: %+v", c)
		}
		if b.name == "mysql" || b.name == "mariadb" {
			claim := tbl.Name + "_claim"
			ix := check().Index.Columns
			if ix[len(ix)-1] != tbl.Kind {
				t.Fatalf("claim index %v does not end with the kind", ix)
			}
			// The index as it was before kinds: the claim order without the kind.
			cols := make([]string, len(ix)-1)
			for i, col := range ix[:len(ix)-1] {
				cols[i] = b.q(t, col)
			}
			mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" DROP INDEX "+b.q(t, claim)+", ADD INDEX "+b.q(t, claim)+" ("+strings.Join(cols, ", ")+")")
			c := check()
			if c.OK() || c.Index.LacksKind != claim {
				t.Fatalf("the check of an index without the kind: OK %v, lacking the kind %q; want not OK, %q", c.OK(), c.Index.LacksKind, claim)
			}
			mustExec(t, db, c.Index.Fix)
			if c := check(); !c.OK() || c.Index.Found != claim {
				t.Fatalf("after the fix %q the check finds %+v", c.Index.Fix, c.Index)
			}
		}
		var kinds inbox.Kinds
		var log kindLog
		inbox.Handle(&kinds, func(ctx context.Context, d *inbox.Delivery, _ alphaJob) error { log.add(d); return nil })
		client, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Enqueue(ctx, inbox.Job(alphaJob{1}), inbox.Job(betaJob{2}), inbox.Job(alphaJob{3})); err != nil {
			t.Fatal(err)
		}
		form := cell{b: b, form: "lease"}.newForm(t, tbl)
		stop := runConsumer(t, db, form, &kinds, &inbox.Config{})
		waitFor(t, 30*time.Second, "the alpha rows handled", func() bool { return len(log.rows()) == 2 })
		stop()
		if got := log.kinds(); !slices.Equal(got, []string{"alpha"}) {
			t.Errorf("handed kinds %v, want alpha alone", got)
		}
	})
}
