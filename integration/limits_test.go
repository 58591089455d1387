package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// limitTable is kindTable with the lease column named, a limit key column (limit_key) and the
// limits table (inbox_limits).
func limitTable(name string) inbox.Table {
	tbl := kindTable(name)
	tbl.LockedUntil = "locked_until"
	tbl.LimitKey = "limit_key"
	tbl.Limits = inbox.LimitsTable
	return tbl
}

// newLimitTable creates the table limitTable describes, named for the test, with its limit key
// column, and the limits and slots tables as inbox schema -limits creates them; the test's
// limits and slots are deleted when it ends.
func (b backend) newLimitTable(t *testing.T, db *sql.DB) inbox.Table {
	t.Helper()
	tbl := b.newTable(t, db, limitTable)
	typ := sqltext.KeyText(b.dialect.Caps(), 191) + " NULL" // as inbox schema declares it
	if b.name == "sqlite" {
		typ = "TEXT"
	}
	mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD "+b.q(t, tbl.LimitKey)+" "+typ)
	stmts, err := inbox.LimitsSchema(b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		mustExec(t, db, s)
	}
	t.Cleanup(func() {
		for _, side := range []string{inbox.LimitsTable, "inbox_slots"} {
			db.Exec("DELETE FROM "+side+" WHERE table_name = "+b.placeholders(1), tbl.Name)
		}
	})
	return tbl
}

// setLimit sets a limit of queue "q" on tbl, failing the test on an error.
func (b backend) setLimit(t *testing.T, db *sql.DB, tbl inbox.Table, scope inbox.LimitScope, key string, max int) {
	t.Helper()
	c, err := inbox.NewClient(db, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetLimit(context.Background(), inbox.Limit{Queue: "q", Scope: scope, Key: key, Max: max}); err != nil {
		t.Fatal(err)
	}
}

// run is one delivery a handler recorded: its row, its kind and limit key (from its payload,
// "kind/key/i"), and when its handler started and ended.
type run struct {
	id         int64
	kind, key  string
	start, end time.Time
}

// limitMessages are n messages of queue "q" of kind kind and limit key key ("" for none), their
// payload "kind/key/i".
func limitMessages(n int, kind, key string) []inbox.Message {
	msgs := make([]inbox.Message, n)
	for i := range msgs {
		msgs[i] = inbox.Message{Queue: "q", Kind: kind, LimitKey: key, Payload: []byte(fmt.Sprintf("%s/%s/%d", kind, key, i))}
	}
	return msgs
}

// runOf starts the record of d's run.
func runOf(d *inbox.Delivery) run {
	parts := strings.SplitN(string(d.Payload), "/", 3)
	return run{id: d.ID, kind: parts[0], key: parts[1], start: time.Now()}
}

// mostAtOnce is the most of runs that match at once, at any instant (an end and a start at the
// same instant do not overlap), and when that first happened.
func mostAtOnce(runs []run, match func(run) bool) (int, time.Time) {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range runs {
		if match(r) {
			edges = append(edges, edge{r.start, 1}, edge{r.end, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends first
	})
	most, n := 0, 0
	var when time.Time
	for _, e := range edges {
		n += e.delta
		if n > most {
			most, when = n, e.at
		}
	}
	return most, when
}

// sampled starts a sampler that reads in work every 5 ms and returns the most it saw, when
// stopped.
func sampled(inWork func() int) (stop func() int) {
	done, most := make(chan struct{}), make(chan int)
	go func() {
		m := 0
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				m = max(m, inWork())
			case <-done:
				most <- m
				return
			}
		}
	}()
	return func() int { close(done); return <-most }
}

// press holds a test's first runs until want of them are in work at once, or pressFor has
// passed, and lets every run go on at once from then: a test that must see its limit reached
// then sees it however slowly claims come (on SQLite under -race, one at a time and tens of
// milliseconds each, a handler's pause can end before the next claim), and a limit that lets
// more than want in work is still seen over it. The zero press holds nothing.
type press struct {
	want    int
	reached atomic.Bool
}

// pressFor bounds how long a run waits for the others a press wants.
const pressFor = 5 * time.Second

// wait returns once inWork has reached p.want in any run, or pressFor after it was called.
func (p *press) wait(inWork func() int) {
	for deadline := time.Now().Add(pressFor); p.want > 0 && !p.reached.Load() && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if inWork() >= p.want {
			p.reached.Store(true)
		}
	}
}

// recorder is a handler that records each run, sleeping pause in it (after press), and counts
// the runs in work.
type recorder struct {
	pause time.Duration
	press press
	runs  collector[run]
	mu    sync.Mutex
	now   int
}

func (r *recorder) Handle(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
	x := runOf(d)
	r.mu.Lock()
	r.now++
	r.mu.Unlock()
	r.press.wait(r.inWork)
	time.Sleep(r.pause)
	r.mu.Lock()
	r.now--
	r.mu.Unlock()
	x.end = time.Now()
	r.runs.add(x)
	return outcome.Ack()
}

func (r *recorder) inWork() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

// limitConsumers builds n consumers of tbl, each on a pool of its own as n processes would
// have, of workers workers, handing rows to h.
func limitConsumers(t *testing.T, b backend, dbs []*sql.DB, tbl inbox.Table, workers int, h inbox.Handler) []*inbox.Consumer {
	return spread{b: b, pools: dbs}.consumers(t, tbl, workers, 20*time.Millisecond, h)
}

// TestLimitsPerQueue: three consumers of 4 workers each, on pools of their own, drain 60 rows of a
// queue limited to 3 in work: the handlers' runs, recorded and sampled every 5 ms, never number
// more than 3 at once, and do reach 3 (the workers press on the limit), and every row runs once.
func TestLimitsPerQueue(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		limitsPerQueue(t, localSpread(t, b, 3, 8))
	})
}

// limitsPerQueue is TestLimitsPerQueue's scenario on s: a consumer of 4 workers on each of s's
// pools drains 60 rows of a queue limited to 3 in work.
func limitsPerQueue(t *testing.T, s spread) {
	const workers, rows, limit = 4, 60, 3
	b := s.b
	tbl := b.newLimitTable(t, s.admin)
	b.setLimit(t, s.admin, tbl, inbox.LimitPerQueue, "", limit)
	b.enqueue(t, s.admin, tbl, limitMessages(rows, "a", "")...)
	s.ready(t, tbl.Name)
	// The first runs wait for each other (press): claims run one at a time on SQLite, slowly
	// under -race, and a fixed pause left the limit at 2 there on a loaded machine.
	h := &recorder{pause: 10 * time.Millisecond, press: press{want: limit}}
	stop := sampled(h.inWork)
	drainTable(t, b, s.admin, tbl, time.Minute, "every row processed", s.consumers(t, tbl, workers, 20*time.Millisecond, h)...)
	if most := stop(); most > limit {
		t.Errorf("the sampler saw %d rows in work at once, over the limit of %d", most, limit)
	}
	all := h.runs.all()
	if len(all) != rows {
		t.Errorf("%d runs, want %d (each row once)", len(all), rows)
	}
	most, at := mostAtOnce(all, func(run) bool { return true })
	if most > limit {
		t.Errorf("%d rows in work at once at %v, over the limit of %d", most, at, limit)
	}
	if most < limit {
		t.Errorf("at most %d rows in work at once: the test never pressed on the limit of %d", most, limit)
	}
}

// TestLimitsPerKindAndKey: rows of kind "a" are limited to 2 in work, rows of key "k" to 1, and
// the queue to none; rows of kind "b" without a key run beside them. Three consumers of 4
// workers, whose handler takes every kind, drain them: kind a never has more than 2 in work, key k never more than 1, and the
// rows of no limit run more than 2 at once.
func TestLimitsPerKindAndKey(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl := b.newLimitTable(t, dbs[0])
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerKind, "a", 2)
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerKey, "k", 1)
		var msgs []inbox.Message
		for i := range 20 {
			msgs = append(msgs, limitMessages(1, "a", "")[0], limitMessages(1, "b", "k")[0], limitMessages(1, "b", "")[0])
			msgs[len(msgs)-1].Payload = fmt.Appendf(nil, "b//%d", i)
		}
		b.enqueue(t, dbs[0], tbl, msgs...)
		h := &recorder{pause: 10 * time.Millisecond}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", limitConsumers(t, b, dbs, tbl, 4, h)...)
		all := h.runs.all()
		if len(all) != len(msgs) {
			t.Errorf("%d runs, want %d (each row once)", len(all), len(msgs))
		}
		if most, at := mostAtOnce(all, func(r run) bool { return r.kind == "a" }); most > 2 {
			t.Errorf("%d rows of kind a in work at once at %v, over its limit of 2", most, at)
		}
		if most, at := mostAtOnce(all, func(r run) bool { return r.key == "k" }); most > 1 {
			t.Errorf("%d rows of key k in work at once at %v, over its limit of 1", most, at)
		}
		// Beside two of kind a and one of key k, rows under no limit run three at once or more;
		// on SQLite, whose claims run one at a time (and slowly under -race), two.
		least := 3
		if b.dialect.Caps().OneWriter {
			least = 2
		}
		if most, _ := mostAtOnce(all, func(r run) bool { return r.kind == "b" && r.key == "" }); most < least {
			t.Errorf("rows under no limit ran at most %d at once: the limits held them back", most)
		}
	})
}

// TestLimitsChangedAtRunTime: a queue limited to 4 is lowered to 1 while rows run: the rows in
// work finish, and no handler starts while another runs from then on (a claim that read the
// old limit before the change may still start: 100 ms are left for it); raised to 3, the queue
// runs 3 at once again.
func TestLimitsChangedAtRunTime(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 8)
		tbl := b.newLimitTable(t, dbs[0])
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerQueue, "", 4)
		b.enqueue(t, dbs[0], tbl, limitMessages(150, "a", "")...)
		h := &recorder{pause: 20 * time.Millisecond}
		var stops []func()
		for _, c := range limitConsumers(t, b, dbs, tbl, 4, h) {
			stops = append(stops, startConsumer(t, c))
		}
		waitFor(t, 30*time.Second, "20 rows run", func() bool { return len(h.runs.all()) >= 20 })
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerQueue, "", 1)
		lowered := time.Now()
		// A minute: one at a time on SQLite under -race on a loaded machine, 30 rows took over 30 s.
		waitFor(t, time.Minute, "30 more rows run", func() bool { return len(h.runs.all()) >= 50 })
		// The raise commits before SetLimit returns (which then removes the slots no limit
		// needs): the window of the lowered limit ends when the call begins.
		raising := time.Now()
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerQueue, "", 3)
		raised := time.Now()
		waitFor(t, time.Minute, "every row processed", func() bool {
			return b.countRows(t, dbs[0], tbl, b.q(t, tbl.ProcessedAt)+" IS NULL") == 0
		})
		for _, stop := range stops {
			stop()
		}
		all := h.runs.all()
		for _, r := range all {
			if r.start.Before(lowered.Add(100*time.Millisecond)) || r.start.After(raising) {
				continue
			}
			for _, o := range all {
				if o.id != r.id && o.start.Before(r.start) && o.end.After(r.start) {
					t.Errorf("row %d started at %v while row %d ran (%v to %v), with the limit lowered to 1 at %v", r.id, r.start, o.id, o.start, o.end, lowered)
				}
			}
		}
		after := func(r run) bool { return r.start.After(raised.Add(100 * time.Millisecond)) }
		if most, _ := mostAtOnce(all, after); most != 3 {
			t.Errorf("with the limit raised to 3, at most %d rows ran at once, want 3", most)
		}
	})
}

// TestLimitsRefused: a limit of 0 or less, a key longer than MaxLimitKey, a key's limit on a
// table without the column are refused with clear errors (the row lock and advisory forms hold
// limits: rowlock_limits_test.go, advisory_flows_test.go); a lease table whose limits tables are missing fails
// Open with ErrSchema naming the statements that create them.
func TestLimitsRefused(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newLimitTable(t, db)
		c, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, max := range []int{0, -1} {
			if err := c.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerQueue, Max: max}); err == nil || !strings.Contains(err.Error(), "give 1 or more") {
				t.Errorf("a limit of %d: %v, want a refusal", max, err)
			}
		}
		long := strings.Repeat("k", inbox.MaxLimitKey+1)
		if err := c.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerKey, Key: long, Max: 1}); !errors.Is(err, inbox.ErrLimitKeyTooLong) {
			t.Errorf("a limit's key of %d characters: %v, want ErrLimitKeyTooLong", len(long), err)
		}
		if err := inbox.Enqueue(ctx, db, b.dialect, tbl, inbox.Message{Queue: "q", LimitKey: long}); !errors.Is(err, inbox.ErrLimitKeyTooLong) {
			t.Errorf("a message's limit key of %d characters: %v, want ErrLimitKeyTooLong", len(long), err)
		}
		missing := tbl
		missing.Limits = "inbox_limits_missing"
		_, err = lease.New(b.dialect, missing, nil).Open(ctx, db, inbox.Binding{Name: "q"})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS") {
			t.Errorf("a lease table whose limits table is missing: %v, want ErrSchema naming the CREATE TABLE", err)
		}
	})
}

// TestLimitsSettlementWakesTheClaims: a consumer of 2 workers under a limit of 1, whose poll
// would not come for an hour, drains 100 rows: its claims find the limit full while the last
// row's ack is in flight, and each settlement wakes them, rather than the next poll.
func TestLimitsSettlementWakesTheClaims(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := b.newLimitTable(t, db)
		b.setLimit(t, db, tbl, inbox.LimitPerQueue, "", 1)
		b.enqueue(t, db, tbl, limitMessages(100, "a", "")...)
		h := &recorder{}
		cons := inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Workers: 2, PollInterval: time.Hour, Logger: testLogger(t)})
		drainTable(t, b, db, tbl, 30*time.Second, "every row processed without a poll", cons)
		if most, at := mostAtOnce(h.runs.all(), func(run) bool { return true }); most > 1 {
			t.Errorf("%d rows in work at once at %v, over the limit of 1", most, at)
		}
	})
}

// TestLimitsAndRatesTogether: on every database, a queue limited to 2 rows in work and to 6
// starts per 500 ms, drained by three consumers (each its own pool) of 4 workers: one claim
// takes a row's limit slot and its start slot, so the handlers' runs never number more than 2
// at once, no window of 500 ms holds more than 6 claims, and every row runs once.
func TestLimitsAndRatesTogether(t *testing.T) {
	const consumers, workers, rows, limit, starts, per = 3, 4, 30, 2, 6, 500 * time.Millisecond
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, consumers, 8)
		tbl := b.newLimitTable(t, dbs[0])
		tbl.Rates = inbox.RatesTable
		st, err := inbox.RatesSchema(b.dialect, tbl)
		must(t, "RatesSchema", err)
		ratesCreate.Lock()
		mustExec(t, dbs[0], st)
		ratesCreate.Unlock()
		t.Cleanup(func() {
			dbs[0].Exec("DELETE FROM "+inbox.RatesTable+" WHERE table_name = "+b.placeholders(1), tbl.Name)
		})
		client, err := inbox.NewClient(dbs[0], b.dialect, tbl)
		must(t, "NewClient", err)
		ctx := context.Background()
		must(t, "SetLimit", client.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerQueue, Max: limit}))
		must(t, "SetRate", client.SetRate(ctx, inbox.Rate{Queue: "q", Starts: starts, Per: per}))
		b.enqueue(t, dbs[0], tbl, limitMessages(rows, "a", "")...)

		var claims collector[rateStart]
		timed := claimTimes(t, b, dbs[0], tbl, &claims, 0)
		h := &recorder{pause: 20 * time.Millisecond}
		both := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			timed.Handle(ctx, d)
			return h.Handle(ctx, d)
		})
		stop := sampled(h.inWork)
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", limitConsumers(t, b, dbs, tbl, workers, both)...)
		if most := stop(); most > limit {
			t.Errorf("the sampler saw %d rows in work at once, over the limit of %d", most, limit)
		}
		all := h.runs.all()
		if len(all) != rows {
			t.Errorf("%d runs, want %d (each row once)", len(all), rows)
		}
		if most, at := mostAtOnce(all, func(run) bool { return true }); most > limit {
			t.Errorf("%d rows in work at once at %v, over the limit of %d", most, at, limit)
		}
		if most := checkRate(t, "the queue", timesOf(claims.all(), ""), starts, per); most < starts {
			t.Errorf("at most %d claims in a window of %v: the test never pressed on the rate of %d", most, per, starts)
		}
	})
}
