package integration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The row lock form's rates per limit key, rates with FIFO groups and groups with concurrency
// limits (rowlock/rates.go, rowlock/groups.go, rowlock/limits.go): a row takes a start slot of
// every rate that matches it (queue, kind, key) once its lock and its group's hold are taken, in
// statements that commit at once; a start refused then rolls the claim back. A group's head held
// back by a rate or a limit holds back its group.

// rowlockRateConsumers are consumers of 4 workers of tbl in the row lock form, one on each of
// dbs (as processes), each handing its rows to h; where spans is not nil, each records there
// the span of the Claim that returned each row (timedForm).
func rowlockRateConsumers(t *testing.T, b backend, dbs []*sql.DB, tbl inbox.Table, h inbox.Handler, spans *collector[kindSpan]) []*inbox.Consumer {
	var cs []*inbox.Consumer
	for _, db := range dbs {
		var f inbox.Form = rowlock.New(b.dialect.(rowlock.Dialect), tbl)
		if spans != nil {
			f = timedForm{f.(*rowlock.Form[rowlock.Dialect]), spans}
		}
		cs = append(cs, inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)}))
	}
	return cs
}

// kindSpan is a row's kind and when the Claim that returned a row ran: the row's start slots were taken within
// it, since the row lock form takes them during the claim.
type kindSpan struct {
	kind     string
	from, to time.Time
}

// timedForm is the row lock form recording the span of each Claim for each row it returns: a
// bound on the time of the row's start, which a handler's own start can follow by a claim of
// several rows and a scheduler's delay (rowlockRateSlack).
type timedForm struct {
	*rowlock.Form[rowlock.Dialect]
	spans *collector[kindSpan]
}

func (f timedForm) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	from := time.Now()
	ds, err := f.Form.Claim(ctx, max)
	to := time.Now()
	for _, d := range ds {
		f.spans.add(kindSpan{kind: d.Kind, from: from, to: to})
	}
	return ds, err
}

func (f timedForm) ClaimBatch(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	from := time.Now()
	ds, err := f.Form.ClaimBatch(ctx, max)
	to := time.Now()
	for _, d := range ds {
		f.spans.add(kindSpan{kind: d.Kind, from: from, to: to})
	}
	return ds, err
}

// spansOf is the spans of kind ("": all).
func spansOf(spans []kindSpan, kind string) []kindSpan {
	var of []kindSpan
	for _, s := range spans {
		if kind == "" || s.kind == kind {
			of = append(of, s)
		}
	}
	return of
}

// checkRateSpans fails where n+1 rows were claimed by Claims that all ran within less than per:
// their start slots were then taken within less than per, more than a rate of n starts per per
// admits. The check is exact whatever the delay from a claim to its handler: the slots of any
// n+1 starts span per or more, and each lies within its Claim's span.
func checkRateSpans(t *testing.T, what string, spans []kindSpan, n int, per time.Duration) {
	t.Helper()
	for _, first := range spans {
		var ends []time.Time
		for _, s := range spans {
			if !s.from.Before(first.from) {
				ends = append(ends, s.to)
			}
		}
		if len(ends) <= n {
			continue
		}
		slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
		if within := ends[n].Sub(first.from); within < per {
			t.Errorf("%s: %d rows claimed by Claims that all ran within %v, more than its rate of %d per %v admits", what, n+1, within, n, per)
			return
		}
	}
}

// TestRowlockRatesPerKey: TestRatesPerKey in the row lock form: key a at 3 starts per 500 ms,
// key b at 1, rows of no key beside them, three consumers (pools of their own) of 4 workers: no
// n+1 rows of a rate of n were claimed by Claims that all ran within its interval (at most 3 of
// a, 1 of b: checkRateSpans), and a's rate binds; the rows of no key are under no key's rate.
func TestRowlockRatesPerKey(t *testing.T) {
	const per = 500 * time.Millisecond
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newKeyRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of key a", client.SetRate(ctx, keyRate("a", 3, per)))
		must(t, "SetRate of key b", client.SetRate(ctx, keyRate("b", 1, per)))
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "a", 12)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "b", 6)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "", 20)...)
		var starts collector[rateStart]
		var spans collector[kindSpan]
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", rowlockRateConsumers(t, b, dbs, tbl, handlerStarts(&starts, 20*time.Millisecond), &spans)...)
		all := starts.all()
		if len(all) != 38 {
			t.Errorf("%d starts, want 38", len(all))
		}
		checkRateSpans(t, "key a", spansOf(spans.all(), "a"), 3, per)
		if most := mostWithin(timesOf(all, "a"), per); most < 3 {
			t.Errorf("key a: at most %d starts in any window of %v, want its rate (3) reached", most, per)
		}
		checkRateSpans(t, "key b", spansOf(spans.all(), "b"), 1, per)
		if most := mostWithin(timesOf(all, "none"), per); most <= 3 {
			t.Errorf("the rows of no key: at most %d starts in any window of %v, want more than a key's rate", most, per)
		}
	})
}

// TestRowlockRatesPerKeyWithQueueRate: a queue rate of 4 starts per 500 ms and key a's of 1,
// three consumers of 4 workers, 6 rows of a and 20 of key b (no rate): a start passes every
// rate that matches it, the queue's and its key's.
func TestRowlockRatesPerKeyWithQueueRate(t *testing.T) {
	const per = 500 * time.Millisecond
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newKeyRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of the queue", client.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 4, Per: per}))
		must(t, "SetRate of key a", client.SetRate(ctx, keyRate("a", 1, per)))
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "a", 6)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "b", 20)...)
		var starts collector[rateStart]
		var spans collector[kindSpan]
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", rowlockRateConsumers(t, b, dbs, tbl, handlerStarts(&starts, 20*time.Millisecond), &spans)...)
		all := starts.all()
		if len(all) != 26 {
			t.Errorf("%d starts, want 26", len(all))
		}
		checkRateSpans(t, "the queue", spans.all(), 4, per)
		if most := mostWithin(timesOf(all, ""), per); most < 4 {
			t.Errorf("the queue: at most %d starts in any window of %v, want its rate (4) reached", most, per)
		}
		checkRateSpans(t, "key a", spansOf(spans.all(), "a"), 1, per)
	})
}

// TestRowlockRatesPerKeyDoNotHoldBackOthers: key hot at 1 start per second, its 30 rows first in
// claim order; 40 rows of key cold (100 per second) after them. Two consumers of 4 workers start
// every cold row within 3 seconds while hot's rate holds: the candidates' read passes over a
// full key's rows before its LIMIT, and a rate found full in a claim passes its rows over before
// any lock (with both off, each claim locks hot rows, is refused their start and rolls back
// until its tries run out, and cold rows wait).
func TestRowlockRatesPerKeyDoNotHoldBackOthers(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 8)
		tbl, client := b.newKeyRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of key hot", client.SetRate(ctx, keyRate("hot", 1, time.Second)))
		must(t, "SetRate of key cold", client.SetRate(ctx, keyRate("cold", 100, time.Second)))
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "hot", 30)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "cold", 40)...)
		var starts collector[rateStart]
		var spans collector[kindSpan]
		var stops []func()
		for _, db := range dbs {
			f := timedForm{rowlock.New(b.dialect.(rowlock.Dialect), tbl), &spans}
			stops = append(stops, runConsumer(t, db, f, handlerStarts(&starts, 5*time.Millisecond), &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)}))
		}
		cold := func() int { return len(timesOf(starts.all(), "cold")) }
		if !eventually(3*time.Second, func() bool { return cold() == 40 }) {
			t.Errorf("%d of the 40 cold rows started within 3s, %d hot ones: the hot key held them back", cold(), len(timesOf(starts.all(), "hot")))
		}
		for _, stop := range stops {
			stop()
		}
		checkRateSpans(t, "key hot", spansOf(spans.all(), "hot"), 1, time.Second)
	})
}

// newGroupedTable creates a table of every role with a kind column, the lease column named, a
// FIFO group column (group_key, with its index and the table of group holds) and a limit key
// column (limit_key), and, as with says, the rates table ("rates") or the limits and slots tables
// ("limits"); what the test writes to the shared tables is deleted when it ends. It returns a
// client of the table on db.
func (b backend) newGroupedTable(t *testing.T, db *sql.DB, with string) (inbox.Table, *inbox.Client[dialect.Dialect]) {
	t.Helper()
	tbl := b.newTable(t, db, func(name string) inbox.Table {
		tbl := kindTable(name)
		tbl.LockedUntil, tbl.GroupKey, tbl.LimitKey = "locked_until", "group_key", "limit_key"
		if with == "rates" {
			tbl.Rates = inbox.RatesTable
		} else {
			tbl.Limits = inbox.LimitsTable
		}
		return tbl
	})
	typ := sqltext.KeyText(b.dialect.Caps(), 191) + " NULL" // byte for byte, as inbox schema declares it
	mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD "+b.q(t, tbl.GroupKey)+" "+typ)
	mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD "+b.q(t, tbl.LimitKey)+" "+typ)
	index, err := schema.GroupIndex(b.dialect, tbl)
	must(t, "GroupIndex", err)
	mustExec(t, db, index)
	mustExec(t, db, sqltext.CreateGroups(b.dialect.Caps()))
	if _, err := db.Exec(sqltext.CheckGroups().SQL); err != nil {
		db.Exec(sqltext.AddGroupsPaused(b.dialect.Caps())) // a holds' table of before paused_at
		mustExec(t, db, sqltext.CheckGroups().SQL)
	}
	side := []string{sqltext.GroupsTable}
	if with == "rates" {
		st, err := inbox.RatesSchema(b.dialect, tbl)
		must(t, "RatesSchema", err)
		ratesCreate.Lock()
		mustExec(t, db, st)
		ratesCreate.Unlock()
		side = append(side, inbox.RatesTable)
	} else {
		stmts, err := inbox.LimitsSchema(b.dialect, tbl)
		must(t, "LimitsSchema", err)
		for _, s := range stmts {
			mustExec(t, db, s)
		}
		side = append(side, inbox.LimitsTable, sqltext.SlotsTable)
	}
	t.Cleanup(func() {
		for _, s := range side {
			db.Exec("DELETE FROM "+s+" WHERE table_name = "+b.placeholders(1), tbl.Name)
		}
	})
	client, err := inbox.NewClient(db, b.dialect, tbl)
	must(t, "NewClient", err)
	return tbl, client
}

// groupedKinds are, for each of groups groups (g-0, g-1, …), the rows of kinds, in that order
// within the group, published round robin across the groups, their payload the group's name;
// then ungrouped rows of kind "free".
func groupedKinds(groups int, kinds []string, ungrouped int) []inbox.Message {
	var msgs []inbox.Message
	for _, k := range kinds {
		for g := range groups {
			name := fmt.Sprintf("g-%d", g)
			msgs = append(msgs, inbox.Message{Queue: "q", Kind: k, GroupKey: name, Payload: []byte(name)})
		}
	}
	for range ungrouped {
		msgs = append(msgs, inbox.Message{Queue: "q", Kind: "free"})
	}
	return msgs
}

// kindRun is one delivery a handler recorded: its row, group, kind and when it ran.
type kindRun struct {
	groupRun
	kind string
}

// kindRuns records each delivery's run, sleeping pause, and counts the rows of each kind in work.
type kindRuns struct {
	pause time.Duration
	runs  collector[kindRun]
	mu    sync.Mutex
	now   map[string]int
}

func (k *kindRuns) Handle(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
	r := kindRun{groupRun{id: d.ID, group: string(d.Payload), start: time.Now()}, d.Kind}
	k.mu.Lock()
	k.now[d.Kind]++
	k.mu.Unlock()
	time.Sleep(k.pause)
	k.mu.Lock()
	k.now[d.Kind]--
	k.mu.Unlock()
	r.end = time.Now()
	k.runs.add(r)
	return outcome.Ack()
}

func (k *kindRuns) inWork(kind string) func() int {
	return func() int {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.now[kind]
	}
}

// checkHeadsBlock fails unless every row ran once and, within each group, the runs never
// overlap and go in id order (checkGroupRuns): a row of a group never ran while a row of the
// group before it was held back. It returns the runs of kind.
func checkHeadsBlock(t *testing.T, all []kindRun, want int, kind string) []kindRun {
	t.Helper()
	if len(all) != want {
		t.Errorf("%d runs, want %d (each row once)", len(all), want)
	}
	var grs []groupRun
	var of []kindRun
	for _, r := range all {
		grs = append(grs, r.groupRun)
		if r.kind == kind {
			of = append(of, r)
		}
	}
	checkGroupRuns(t, grs)
	return of
}

// TestRowlockRatesWithGroups: a table with FIFO groups and rates: kind slow at 1 start per 600
// ms; 4 groups of rows slow, fast, slow, fast (in that order within each group) and 10 rows of
// no group; three consumers of 4 workers. Each group's head is slow at first, so every group
// waits on slow's rate: a head held back by its rate (passed over by the candidates' read, or
// refused its start after its lock and its group's hold were taken, which rolls the claim back)
// holds back its group, and the fast row after it never runs in its place: within each group
// the runs go in id order without overlap. Slow's rate holds, and the rows of no group all start
// before the third slow one (the rate holds back no other row).
func TestRowlockRatesWithGroups(t *testing.T) {
	const per = 600 * time.Millisecond
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newGroupedTable(t, dbs[0], "rates")
		must(t, "SetRate of kind slow", client.SetRate(context.Background(), inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "slow", Starts: 1, Per: per}))
		msgs := groupedKinds(4, []string{"slow", "fast", "slow", "fast"}, 10)
		b.enqueue(t, dbs[0], tbl, msgs...)
		h := &kindRuns{pause: 20 * time.Millisecond, now: map[string]int{}}
		var spans collector[kindSpan]
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", rowlockRateConsumers(t, b, dbs, tbl, h, &spans)...)
		all := h.runs.all()
		slow := checkHeadsBlock(t, all, len(msgs), "slow")
		var slowStarts, free []time.Time
		for _, r := range slow {
			slowStarts = append(slowStarts, r.start)
		}
		for _, r := range all {
			if r.kind == "free" {
				free = append(free, r.start)
			}
		}
		checkRateSpans(t, "kind slow", spansOf(spans.all(), "slow"), 1, per)
		slices.SortFunc(slowStarts, func(a, b time.Time) int { return a.Compare(b) })
		if len(slowStarts) == 8 && len(free) == 10 {
			if last := slices.MaxFunc(free, func(a, b time.Time) int { return a.Compare(b) }); !last.Before(slowStarts[2]) {
				t.Errorf("the last row of no group started %v after the first slow one, not before the third slow one (%v after)", last.Sub(slowStarts[0]), slowStarts[2].Sub(slowStarts[0]))
			}
		}
	})
}

// TestRowlockGroupsWithLimits: a table with FIFO groups and concurrency limits: kind slow
// limited to 1 in work; 4 groups of rows slow, fast, slow, fast, and 10 rows of no group; three
// consumers of 4 workers. A head held back by its limit holds back its group (the fast row
// after it never runs in its place: within each group the runs go in id order without overlap),
// at most one slow row is in work at once (by the recorded runs, and sampled every 5 ms), and
// the groups' fast rows and the rows of no group still run beside it.
func TestRowlockGroupsWithLimits(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, _ := b.newGroupedTable(t, dbs[0], "limits")
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerKind, "slow", 1)
		msgs := groupedKinds(4, []string{"slow", "fast", "slow", "fast"}, 10)
		b.enqueue(t, dbs[0], tbl, msgs...)
		h := &kindRuns{pause: 40 * time.Millisecond, now: map[string]int{}}
		stop := sampled(h.inWork("slow"))
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", rowlockRateConsumers(t, b, dbs, tbl, h, nil)...)
		if most := stop(); most > 1 {
			t.Errorf("the sampler saw %d slow rows in work at once, over their limit of 1", most)
		}
		all := h.runs.all()
		checkHeadsBlock(t, all, len(msgs), "slow")
		var runs []run
		for _, r := range all {
			runs = append(runs, run{id: r.id, kind: r.kind, start: r.start, end: r.end})
		}
		if most, at := mostAtOnce(runs, func(r run) bool { return r.kind == "slow" }); most > 1 {
			t.Errorf("%d slow rows in work at once at %v, over their limit of 1", most, at)
		}
		if most, _ := mostAtOnce(runs, func(run) bool { return true }); most < 2 {
			t.Errorf("at most %d rows in work at once: the limit of slow held back every other row", most)
		}
	})
}

// scriptedClock answers the times of its script in turn, then its last one for ever.
type scriptedClock struct {
	mu     sync.Mutex
	script []time.Time
}

func (c *scriptedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.script[0]
	if len(c.script) > 1 {
		c.script = c.script[1:]
	}
	return now
}

// set replaces the script.
func (c *scriptedClock) set(script ...time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.script = script
}

// TestRowlockRatesRefusedAfterLock: the path where a group's head passed the candidates' read
// (its rate looked free) and its row and group were locked, and then its start slot was
// refused. A scripted clock makes it happen at will: the claim reads its candidates 20 s on and
// takes the start 1 s after the rate's last start. Kind slow has a rate of 1 start per 10 s;
// group g holds a first slow row (run at once, taking the rate's slot), slow row A, then fast
// row B; an ungrouped fast row C follows. The claim is
// refused A's start, rolls back (letting A and g go) and goes on to C, passing over B, which is
// not g's head: the claim returns C alone, and while C is in work, g's hold and A are free (a
// second form locks g's hold row; with the refused row passed over without the rollback, g stays
// held by C's transaction). Once the rate's interval has passed, A runs, then B.
func TestRowlockRatesRefusedAfterLock(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl, client := b.newGroupedTable(t, db, "rates")
		ctx := context.Background()
		must(t, "SetRate of kind slow", client.SetRate(ctx, inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "slow", Starts: 1, Per: 10 * time.Second}))
		ids, err := inbox.EnqueueIDs(ctx, db, b.dialect, tbl,
			inbox.Message{Queue: "q", Kind: "slow", GroupKey: "g"},
			inbox.Message{Queue: "q", Kind: "slow", GroupKey: "g", Payload: []byte("A")},
			inbox.Message{Queue: "q", Kind: "fast", GroupKey: "g", Payload: []byte("B")},
			inbox.Message{Queue: "q", Kind: "fast", Payload: []byte("C")})
		must(t, "EnqueueIDs", err)
		first, a, bID, c := ids[0], ids[1], ids[2], ids[3]
		t0 := time.Now()
		clock := &scriptedClock{script: []time.Time{t0}}
		f := openForm(t, rowlockGroupForm(b, tbl), db, inbox.Binding{Name: "q", Clock: clock})
		// The first row of g, slow, takes the rate's one slot at t0, and its claim adds g's hold
		// row.
		if ds := claim(t, f, 1); len(ds) != 1 || ds[0].ID != first {
			t.Fatalf("claimed %v, want row %d", deliveryIDs(ds), first)
		} else {
			settle(t, f, ds[0], outcome.Ack())
		}
		// Candidates at t0+20s (the slot looks free), the start at t0+1s (refused), and every
		// read after at t0+1s (the slot full, so A is left out by the read itself).
		clock.set(t0.Add(20*time.Second), t0.Add(time.Second))
		ds := claim(t, f, 1)
		if len(ds) != 1 || ds[0].ID != c {
			t.Fatalf("claimed %v, want row %d (C) alone: A (%d) refused its start, B (%d) is not its group's head", deliveryIDs(ds), c, a, bID)
		}
		other := openForm(t, rowlockGroupForm(b, tbl), db, inbox.Binding{Name: "q", Clock: clock})
		clock.set(t0.Add(20 * time.Second))
		got := claim(t, other, 4)
		if len(got) != 1 || got[0].ID != a {
			t.Fatalf("while C is in work, a second form claimed %v, want A (%d): A's lock and g's hold must have gone with the refused claim's rollback", deliveryIDs(got), a)
		}
		settle(t, other, got[0], outcome.Ack())
		settle(t, f, ds[0], outcome.Ack())
		if after := claim(t, f, 4); len(after) != 1 || after[0].ID != bID {
			t.Fatalf("after A claimed %v, want B (%d)", deliveryIDs(after), bID)
		}
	})
}

// TestRowlockRatesWithGroupsBatch: TestRowlockRatesWithGroups with batch consumers (three, each
// of 2 workers and batches of up to 4 rows, one transaction each): a batch's claim locks several
// heads, each its group's, and a start refused to one of them rolls the whole batch's claim back
// (the starts its other rows took count, unused). Each group's runs go in id order without
// overlap, slow's rate holds by the claims' spans, and every row runs once.
func TestRowlockRatesWithGroupsBatch(t *testing.T) {
	const per = 600 * time.Millisecond
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newGroupedTable(t, dbs[0], "rates")
		must(t, "SetRate of kind slow", client.SetRate(context.Background(), inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "slow", Starts: 1, Per: per}))
		msgs := groupedKinds(4, []string{"slow", "fast", "slow", "fast"}, 10)
		b.enqueue(t, dbs[0], tbl, msgs...)
		h := &kindRuns{pause: 20 * time.Millisecond, now: map[string]int{}}
		batch := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
			var wg sync.WaitGroup
			os := make([]outcome.Outcome, len(ds))
			for i, d := range ds {
				wg.Add(1)
				go func() { defer wg.Done(); os[i] = h.Handle(ctx, d) }()
			}
			wg.Wait()
			return os
		})
		var spans collector[kindSpan]
		var cs []*inbox.Consumer
		for _, db := range dbs {
			f := timedForm{rowlock.New(b.dialect.(rowlock.Dialect), tbl), &spans}
			cs = append(cs, inbox.NewBatchConsumer(db, f, 4, batch, &inbox.Config{Queue: "q", Workers: 2, PollInterval: cellPoll, Logger: testLogger(t)}))
		}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
		checkHeadsBlock(t, h.runs.all(), len(msgs), "slow")
		checkRateSpans(t, "kind slow", spansOf(spans.all(), "slow"), 1, per)
	})
}
