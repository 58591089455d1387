package integration

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// rateTable is kindTable with the lease column named and the rates table, inbox_rates.
func rateTable(name string) inbox.Table {
	tbl := kindTable(name)
	tbl.LockedUntil = "locked_until"
	tbl.Rates = inbox.RatesTable
	return tbl
}

// ratesCreate keeps the tests from creating the shared rates table side by side.
var ratesCreate sync.Mutex

// newRateTable creates the table rateTable describes, named for the test, and the rates table
// (shared by every table of the database, keyed by table name) as inbox schema -rates creates
// it; the test's rates are deleted when it ends. It returns a client of the table on db.
func (b backend) newRateTable(t *testing.T, db *sql.DB) (inbox.Table, *inbox.Client[dialect.Dialect]) {
	t.Helper()
	tbl := b.newTable(t, db, rateTable)
	st, err := inbox.RatesSchema(b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	ratesCreate.Lock()
	mustExec(t, db, st)
	ratesCreate.Unlock()
	t.Cleanup(func() {
		db.Exec("DELETE FROM "+inbox.RatesTable+" WHERE table_name = "+b.placeholders(1), tbl.Name)
	})
	client, err := inbox.NewClient(db, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, client
}

// rateStart is a start a handler recorded: its row's kind and the time of its claim, read from
// the lease the claim wrote (its expiry less the lease), which is the time the claim took its
// start slot with, to the microsecond.
type rateStart struct {
	id      int64
	kind    string
	claimed time.Time
}

// claimTimes is a handler that records the start of each row on db, whose lease is
// lease.DefaultLease, then sleeps work and acks.
func claimTimes(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, starts *collector[rateStart], work time.Duration) inbox.Handler {
	query := "SELECT " + b.q(t, tbl.LockedUntil) + " FROM " + b.q(t, tbl.Name) + " WHERE " + b.q(t, tbl.ID) + " = " + b.placeholders(1)
	return inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		var until any
		if err := db.QueryRowContext(ctx, query, d.ID).Scan(&until); err != nil {
			t.Errorf("reading row %d's lease: %v", d.ID, err)
			return outcome.Retry()
		}
		at, err := dialect.ScannedTime(until)
		if err != nil {
			t.Errorf("row %d's lease: %v", d.ID, err)
		}
		starts.add(rateStart{id: d.ID, kind: d.Kind, claimed: at.Add(-lease.DefaultLease)})
		time.Sleep(work)
		return outcome.Ack()
	})
}

// checkRate fails where any window of per holds more than n of times: every n+1 consecutive
// starts (sorted) must span per or more. It returns the most starts any window of per holds.
func checkRate(t *testing.T, what string, times []time.Time, n int, per time.Duration) int {
	t.Helper()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	most := min(len(times), 1)
	for i := range times {
		j := i
		for j+1 < len(times) && times[j+1].Sub(times[i]) < per {
			j++
		}
		most = max(most, j-i+1)
	}
	if most > n {
		t.Errorf("%s: %d starts within %v, want at most %d", what, most, per, n)
	}
	return most
}

// timesOf is the claim times of the starts kind selects ("" selects all).
func timesOf(starts []rateStart, kind string) []time.Time {
	var ts []time.Time
	for _, s := range starts {
		if kind == "" || s.kind == kind {
			ts = append(ts, s.claimed)
		}
	}
	return ts
}

// TestRatesCombined: on every database, a queue rate of 6 starts per 500 ms and a rate of 2 per
// 500 ms of kind slow, while three consumers (each its own pool, as three processes) of 4
// workers drain 10 slow rows and 30 fast ones: in any window of 500 ms, at most 6 rows start,
// and at most 2 slow ones, by the claims' own times; and the queue's rate binds (some window
// holds 6).
func TestRatesCombined(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ratesCombined(t, localSpread(t, b, 3, 8))
	})
}

// ratesCombined is TestRatesCombined's scenario on s: a consumer of 4 workers on each of s's
// pools drains 10 slow rows and 30 fast ones under a queue rate of 6 per 500 ms and a rate of
// kind slow of 2 per 500 ms.
func ratesCombined(t *testing.T, s spread) {
	const per = 500 * time.Millisecond
	b := s.b
	tbl, client := b.newRateTable(t, s.admin)
	ctx := context.Background()
	must(t, "SetRate of the queue", client.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 6, Per: per}))
	must(t, "SetRate of kind slow", client.SetRate(ctx, inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "slow", Starts: 2, Per: per}))
	b.enqueue(t, s.admin, tbl, kindMessages("q", "slow", 10)...)
	b.enqueue(t, s.admin, tbl, kindMessages("q", "fast", 30)...)
	s.ready(t, tbl.Name)
	var starts collector[rateStart]
	var cs []*inbox.Consumer
	for _, db := range s.pools {
		h := claimTimes(t, b, db, tbl, &starts, 20*time.Millisecond)
		cs = append(cs, inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), h, s.config(&inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)})))
	}
	drainTable(t, b, s.admin, tbl, time.Minute, "every row processed", cs...)
	all := starts.all()
	// A row whose lease ran out before its settlement (a loaded machine) starts again, which
	// counts against the rates as any start does.
	started := map[int64]bool{}
	for _, s := range all {
		started[s.id] = true
	}
	if len(started) != 40 {
		t.Errorf("%d rows started, want 40", len(started))
	}
	if most := checkRate(t, "the queue", timesOf(all, ""), 6, per); most < 6 {
		t.Errorf("the queue: at most %d starts in any window of %v, want its rate (6) reached", most, per)
	}
	checkRate(t, "kind slow", timesOf(all, "slow"), 2, per)
}

// TestRatesDoNotHoldBackOthers: on every database, kind slow has a rate of 1 start per second
// and its 4 rows come first in claim order; 40 fast rows after them have no rate. Every fast row
// starts before the third slow one, which its rate holds back two seconds: the pick passes over
// slow rows while their rate is full, before its LIMIT, and a claim whose pick met slow rows
// picks again for the others.
func TestRatesDoNotHoldBackOthers(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 8)
		tbl, client := b.newRateTable(t, dbs[0])
		must(t, "SetRate of kind slow", client.SetRate(context.Background(), inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "slow", Starts: 1, Per: time.Second}))
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "slow", 4)...)
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "fast", 40)...)
		var starts collector[rateStart]
		var cs []*inbox.Consumer
		for _, db := range dbs {
			h := claimTimes(t, b, db, tbl, &starts, 5*time.Millisecond)
			cs = append(cs, inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)}))
		}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
		all := starts.all()
		slow, fast := timesOf(all, "slow"), timesOf(all, "fast")
		checkRate(t, "kind slow", slow, 1, time.Second)
		slices.SortFunc(slow, func(a, b time.Time) int { return a.Compare(b) })
		if len(slow) != 4 || len(fast) != 40 {
			t.Fatalf("%d slow and %d fast starts, want 4 and 40", len(slow), len(fast))
		}
		if last := slices.MaxFunc(fast, func(a, b time.Time) int { return a.Compare(b) }); !last.Before(slow[2]) {
			t.Errorf("the last fast row started %v after the first slow one, not before the third slow one (%v after)", last.Sub(slow[0]), slow[2].Sub(slow[0]))
		}
	})
}

// TestRatesChangeAtRunTime: on every database, a queue rate of 2 starts per 500 ms, raised to
// 10 while two consumers drain 60 rows: the windows that end before the change hold at most 2
// starts, those that begin after it at most 10, and some window after it holds more than 2 (a
// start's time is its claim's, read just before the claim's transaction, which sees the rate
// as committed when it runs: the starts within 200 ms of a change are left out).
// Cleared, the rate no longer holds: the rest drains at once.
func TestRatesChangeAtRunTime(t *testing.T) {
	const per = 500 * time.Millisecond
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 8)
		tbl, client := b.newRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate", client.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 2, Per: per}))
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "any", 60)...)
		var starts collector[rateStart]
		for _, db := range dbs {
			h := claimTimes(t, b, db, tbl, &starts, 5*time.Millisecond)
			runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)})
		}
		time.Sleep(1200 * time.Millisecond)
		before := time.Now()
		must(t, "SetRate raised", client.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 10, Per: per}))
		after := time.Now()
		rates, err := client.Rates(ctx)
		if err != nil || len(rates) != 1 || rates[0].Starts != 10 || rates[0].Per != per {
			t.Errorf("Rates = %+v, %v; want the queue's, 10 per %v", rates, err, per)
		}
		waitFor(t, time.Minute, "40 rows started", func() bool { return len(starts.all()) >= 40 })
		cleared := time.Now()
		must(t, "ClearRate", client.ClearRate(ctx, "q", inbox.LimitPerQueue, ""))
		waitFor(t, time.Minute, "every row started", func() bool { return len(starts.all()) == 60 })
		var early, late []time.Time
		for _, s := range timesOf(starts.all(), "") {
			switch {
			case s.Before(before.Add(-200 * time.Millisecond)):
				// A claim reads its time before its transaction, which may begin after the
				// change committed and then admits rows by the new rate.
				early = append(early, s)
			case s.After(after) && s.Before(cleared.Add(-200*time.Millisecond)):
				// Likewise a claim that began before the ClearRate committed and ran after it.
				late = append(late, s)
			}
		}
		checkRate(t, "before the change", early, 2, per)
		slices.SortFunc(late, func(a, b time.Time) int { return a.Compare(b) })
		if most := checkRate(t, "after the change", late, 10, per); most <= 2 {
			t.Errorf("after the change: at most %d starts in any window of %v, want more than the old rate's 2", most, per)
		}
	})
}

// TestRatesBadInputAndOtherForms: a rate of 0 or fewer starts, or of an interval under a
// microsecond, is refused, naming the queue; a kind's rate where the table has no kind column
// and a rates table the description does not name are refused (ErrSchema). The row lock and
// advisory forms take start slots (rowlock_rates_test.go, advisory_flows_test.go); the lease
// form refuses one
// whose rates table the database lacks, naming the statement that creates it.
func TestRatesBadInputAndOtherForms(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl, client := b.newRateTable(t, db)
		ctx := context.Background()
		for _, r := range []inbox.Rate{{Queue: "q", Starts: 0, Per: time.Second}, {Queue: "q", Starts: -1, Per: time.Second}, {Queue: "q", Starts: 1}, {Queue: "q", Starts: 1, Per: -time.Second}, {Queue: "q", Starts: inbox.MaxRateStarts + 1, Per: time.Second}} {
			if err := client.SetRate(ctx, r); err == nil || !strings.Contains(err.Error(), `queue "q"`) {
				t.Errorf("SetRate(%+v) = %v, want an error naming the queue", r, err)
			}
		}
		plain := tbl
		plain.Kind = ""
		if c, err := inbox.NewClient(db, b.dialect, plain); err != nil {
			t.Fatal(err)
		} else if err := c.SetRate(ctx, inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "k", Starts: 1, Per: time.Second}); !errors.Is(err, inbox.ErrSchema) {
			t.Errorf("SetRate of a kind without a kind column = %v, want ErrSchema", err)
		}
		none := tbl
		none.Rates = ""
		if c, err := inbox.NewClient(db, b.dialect, none); err != nil {
			t.Fatal(err)
		} else if err := c.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 1, Per: time.Second}); !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "inbox.Table.Rates") {
			t.Errorf("SetRate without a rates table named = %v, want ErrSchema naming inbox.Table.Rates", err)
		}
		missing := tbl
		missing.Rates = "inbox_rates_missing"
		_, err := lease.New(b.dialect, missing, nil).Open(ctx, db, inbox.Binding{Name: "q"})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS") {
			t.Errorf("Open without its rates table = %v, want ErrSchema naming its CREATE TABLE", err)
		}
	})
}

// kindMessages are n messages of queue q and kind k.
func kindMessages(q, k string, n int) []inbox.Message {
	msgs := messages(q, n)
	for i := range msgs {
		msgs[i].Kind = k
	}
	return msgs
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
