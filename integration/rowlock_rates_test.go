package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The row lock form's rate limits: a claim takes a row's start slots, once it has locked the
// row, in statements of their own that commit at once (rowlock/rates.go).

// handlerStarts is a handler that records the kind and the time each run starts, then sleeps
// work and acks. A run starts after its claim took its start slot, by a few milliseconds that
// vary: rowlockRateSlack allows for them when the starts are checked against a rate.
func handlerStarts(starts *collector[rateStart], work time.Duration) inbox.Handler {
	return inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		starts.add(rateStart{id: d.ID, kind: d.Kind, claimed: time.Now()})
		time.Sleep(work)
		return outcome.Ack()
	})
}

// rowlockRateSlack is how much shorter than the rate's interval the window is that the handlers'
// starts are checked in: the spread between a claim's start slot and its handler's start (a
// Claim takes its rows one transaction after another before any of their handlers starts, and
// on MariaDB each costs several round trips). Without the start slots the rows start within a
// few tens of milliseconds of each other, far inside it.
const rowlockRateSlack = 150 * time.Millisecond

// TestRowlockRatesCombined: TestRatesCombined in the row lock form: a queue rate of 6 starts per
// 500 ms and a kind rate of 2 per 500 ms, three consumers (pools of their own) of 4 workers, 10
// slow and 30 fast rows: no 7 start slots (no 3 of kind slow) were certainly taken within one
// window of 500 ms, each bounded by its claim's call (the handlers' starts, later by a spread
// that grows with the machine's load, would not bound them); and the queue's rate binds (some
// window of 500 ms holds 6 handler starts).
func TestRowlockRatesCombined(t *testing.T) {
	const consumers, per = 3, 500 * time.Millisecond
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, consumers, 8)
		tbl, client := b.newRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of the queue", client.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 6, Per: per}))
		must(t, "SetRate of kind slow", client.SetRate(ctx, inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "slow", Starts: 2, Per: per}))
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "slow", 10)...)
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "fast", 30)...)
		var starts collector[rateStart]
		spans := map[string]*collector[claimSpan]{"slow": {}, "fast": {}}
		var cs []*inbox.Consumer
		for _, db := range dbs {
			f := &keySpanForm{Form: rowlock.New(b.dialect.(rowlock.Dialect), tbl), spans: spans}
			cs = append(cs, inbox.NewConsumer(db, f, handlerStarts(&starts, 20*time.Millisecond), &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)}))
		}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
		all := starts.all()
		if len(all) != 40 {
			t.Errorf("%d starts, want 40", len(all))
		}
		slow := spans["slow"].all()
		checkSpans(t, append(slices.Clone(slow), spans["fast"].all()...), 6, per)
		checkSpans(t, slow, 2, per)
		if most := mostWithin(timesOf(all, ""), per); most < 6 {
			t.Errorf("the queue: at most %d starts in any window of %v, want its rate (6) reached", most, per)
		}
	})
}

// TestRowlockRatesDoNotHoldBackOthers: TestRatesDoNotHoldBackOthers in the row lock form: kind
// slow at 1 start per second, its 4 rows first in claim order, 40 fast rows of no rate after
// them: every fast row starts before the third slow one.
func TestRowlockRatesDoNotHoldBackOthers(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 8)
		tbl, client := b.newRateTable(t, dbs[0])
		must(t, "SetRate of kind slow", client.SetRate(context.Background(), inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "slow", Starts: 1, Per: time.Second}))
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "slow", 4)...)
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "fast", 40)...)
		var starts collector[rateStart]
		var cs []*inbox.Consumer
		for _, db := range dbs {
			cs = append(cs, inbox.NewConsumer(db, rowlock.New(b.dialect.(rowlock.Dialect), tbl), handlerStarts(&starts, 5*time.Millisecond), &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)}))
		}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
		all := starts.all()
		slow, fast := timesOf(all, "slow"), timesOf(all, "fast")
		checkRate(t, "kind slow", slow, 1, time.Second-rowlockRateSlack)
		slices.SortFunc(slow, func(a, b time.Time) int { return a.Compare(b) })
		if len(slow) != 4 || len(fast) != 40 {
			t.Fatalf("%d slow and %d fast starts, want 4 and 40", len(slow), len(fast))
		}
		if last := slices.MaxFunc(fast, func(a, b time.Time) int { return a.Compare(b) }); !last.Before(slow[2]) {
			t.Errorf("the last fast row started %v after the first slow one, not before the third slow one (%v after)", last.Sub(slow[0]), slow[2].Sub(slow[0]))
		}
	})
}

// mostWithin is the most of times (sorted here) within any window of per.
func mostWithin(times []time.Time, per time.Duration) int {
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range times {
		j := i
		for j+1 < len(times) && times[j+1].Sub(times[i]) < per {
			j++
		}
		most = max(most, j-i+1)
	}
	return most
}
