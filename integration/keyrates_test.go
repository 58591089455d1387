package integration

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
)

// keyRateTable is rateTable with the limit key column, limit_key: rates per key, no limits.
func keyRateTable(name string) inbox.Table {
	tbl := rateTable(name)
	tbl.LimitKey = "limit_key"
	return tbl
}

// newKeyRateTable creates the table keyRateTable describes, named for the test, with its limit
// key column, and the rates table; the test's rates are deleted when it ends. It returns a
// client of the table on db.
func (b backend) newKeyRateTable(t *testing.T, db *sql.DB) (inbox.Table, *inbox.Client[dialect.Dialect]) {
	t.Helper()
	tbl := b.newTable(t, db, keyRateTable)
	typ := "VARCHAR(191) NULL"
	if b.name == "sqlite" {
		typ = "TEXT"
	}
	mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD "+b.q(t, tbl.LimitKey)+" "+typ)
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

// keyMessages are n messages of queue q whose limit key is key (none where key is empty); their
// kind is the key too, or "none", so that a handler that records kinds (claimTimes) tells the
// keys apart.
func keyMessages(q, key string, n int) []inbox.Message {
	kind := key
	if kind == "" {
		kind = "none"
	}
	msgs := kindMessages(q, kind, n)
	for i := range msgs {
		msgs[i].LimitKey = key
	}
	return msgs
}

// keyRate is the rate of n starts per per of key in queue q.
func keyRate(key string, n int, per time.Duration) inbox.Rate {
	return inbox.Rate{Queue: "q", Scope: inbox.LimitPerKey, Key: key, Starts: n, Per: per}
}

// rateConsumers drains tbl with n consumers, each on its own pool of dbs (as n processes), of 4
// workers, each recording its starts (claimTimes) into starts.
func rateConsumers(t *testing.T, b backend, dbs []*sql.DB, tbl inbox.Table, starts *collector[rateStart], work time.Duration) {
	t.Helper()
	var cs []*inbox.Consumer
	for _, db := range dbs {
		h := claimTimes(t, b, db, tbl, starts, work)
		cs = append(cs, inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)}))
	}
	drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
}

// TestRatesPerKey: on every database, key a has a rate of 3 starts per 500 ms and key b one of
// 1 per 500 ms, while three consumers (each its own pool, as three processes) of 4 workers drain
// 12 rows of a, 6 of b and 20 of no key: in any window of 500 ms at most 3 rows of a start and
// at most 1 of b, by the claims' own times, and a's rate binds (some window holds 3); the rows
// of no key are under no key's rate (more than 3 of them start within 500 ms).
func TestRatesPerKey(t *testing.T) {
	const per = 500 * time.Millisecond
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newKeyRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of key a", client.SetRate(ctx, keyRate("a", 3, per)))
		must(t, "SetRate of key b", client.SetRate(ctx, keyRate("b", 1, per)))
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "a", 12)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "b", 6)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "", 20)...)
		var starts collector[rateStart]
		rateConsumers(t, b, dbs, tbl, &starts, 20*time.Millisecond)
		all := starts.all()
		if len(all) != 38 {
			t.Errorf("%d starts, want 38", len(all))
		}
		if most := checkRate(t, "key a", timesOf(all, "a"), 3, per); most < 3 {
			t.Errorf("key a: at most %d starts in any window of %v, want its rate (3) reached", most, per)
		}
		checkRate(t, "key b", timesOf(all, "b"), 1, per)
		if most := checkRate(t, "no key", timesOf(all, "none"), 20, per); most <= 3 {
			t.Errorf("the rows of no key: at most %d starts in any window of %v, want more than a key's rate", most, per)
		}
	})
}

// TestRatesPerKeyDoNotHoldBackOthers: on every database, key hot has a rate of 1 start per
// second and 30 rows, first in claim order (more than a claim's picks reach: 4 workers, three
// picks); 40 rows of key cold, whose rate (100 per second) does not bind, come after them. Two
// consumers of 4 workers start every cold row within 3 seconds, while hot's rate holds: a
// saturated key holds back no other key's rows, since the pick passes over its rows before its
// LIMIT (with that predicate off, every pick meets hot rows alone and no cold row starts).
func TestRatesPerKeyDoNotHoldBackOthers(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 8)
		tbl, client := b.newKeyRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of key hot", client.SetRate(ctx, keyRate("hot", 1, time.Second)))
		must(t, "SetRate of key cold", client.SetRate(ctx, keyRate("cold", 100, time.Second)))
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "hot", 30)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "cold", 40)...)
		var starts collector[rateStart]
		var stops []func()
		for _, db := range dbs {
			h := claimTimes(t, b, db, tbl, &starts, 5*time.Millisecond)
			stops = append(stops, runConsumer(t, db, lease.New(b.dialect, tbl, nil), h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: cellPoll, Logger: testLogger(t)}))
		}
		cold := func() int { return len(timesOf(starts.all(), "cold")) }
		if !eventually(3*time.Second, func() bool { return cold() == 40 }) {
			t.Errorf("%d of the 40 cold rows started within 3s, %d hot ones: the hot key held them back", cold(), len(timesOf(starts.all(), "hot")))
		}
		for _, stop := range stops {
			stop()
		}
		checkRate(t, "key hot", timesOf(starts.all(), "hot"), 1, time.Second)
	})
}

// TestRatesPerKeyWithQueueRate: on every database, a queue rate of 4 starts per 500 ms and a
// rate of 1 per 500 ms of key a, while three consumers of 4 workers drain 6 rows of a and 20 of
// key b (no rate): in any window of 500 ms at most 4 rows start, and at most 1 of a; the
// queue's rate binds (some window holds 4). A start passes every rate that matches it.
func TestRatesPerKeyWithQueueRate(t *testing.T) {
	const per = 500 * time.Millisecond
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newKeyRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of the queue", client.SetRate(ctx, inbox.Rate{Queue: "q", Starts: 4, Per: per}))
		must(t, "SetRate of key a", client.SetRate(ctx, keyRate("a", 1, per)))
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "a", 6)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "b", 20)...)
		var starts collector[rateStart]
		rateConsumers(t, b, dbs, tbl, &starts, 20*time.Millisecond)
		all := starts.all()
		if len(all) != 26 {
			t.Errorf("%d starts, want 26", len(all))
		}
		if most := checkRate(t, "the queue", timesOf(all, ""), 4, per); most < 4 {
			t.Errorf("the queue: at most %d starts in any window of %v, want its rate (4) reached", most, per)
		}
		checkRate(t, "key a", timesOf(all, "a"), 1, per)
	})
}

// TestRatesPerKeyBadInput: a key's rate with no key, a queue's rate with a key, a key longer
// than MaxLimitKey (ErrLimitKeyTooLong) and 0 starts are refused, naming the queue; a key's
// rate where the table has no limit key column is refused (ErrSchema, naming
// inbox.Table.LimitKey); Rates lists a key's rate by its scope and key, and ClearRate of the
// key removes it alone.
func TestRatesPerKeyBadInput(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl, client := b.newKeyRateTable(t, db)
		ctx := context.Background()
		long := strings.Repeat("é", inbox.MaxLimitKey+1)
		for _, r := range []inbox.Rate{
			{Queue: "q", Scope: inbox.LimitPerKey, Starts: 1, Per: time.Second},
			{Queue: "q", Scope: inbox.LimitPerQueue, Key: "k", Starts: 1, Per: time.Second},
			{Queue: "q", Scope: "tenant", Key: "k", Starts: 1, Per: time.Second},
			keyRate(long, 1, time.Second), keyRate("k", 0, time.Second), keyRate("k", 1, 0),
		} {
			if err := client.SetRate(ctx, r); err == nil || !strings.Contains(err.Error(), `queue "q"`) {
				t.Errorf("SetRate(%.60v) = %v, want an error naming the queue", r, err)
			}
		}
		if err := client.SetRate(ctx, keyRate(long, 1, time.Second)); !errors.Is(err, inbox.ErrLimitKeyTooLong) {
			t.Errorf("SetRate of a key of %d characters = %v, want ErrLimitKeyTooLong", inbox.MaxLimitKey+1, err)
		}
		plain := tbl
		plain.LimitKey = ""
		if c, err := inbox.NewClient(db, b.dialect, plain); err != nil {
			t.Fatal(err)
		} else if err := c.SetRate(ctx, keyRate("k", 1, time.Second)); !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "inbox.Table.LimitKey") {
			t.Errorf("SetRate of a key without a limit key column = %v, want ErrSchema naming inbox.Table.LimitKey", err)
		}
		max := strings.Repeat("é", inbox.MaxLimitKey)
		must(t, "SetRate of a key of MaxLimitKey characters", client.SetRate(ctx, keyRate(max, 2, time.Second)))
		must(t, "SetRate of kind k", client.SetRate(ctx, inbox.Rate{Queue: "q", Scope: inbox.LimitPerKind, Key: "k", Starts: 3, Per: time.Second}))
		rates, err := client.Rates(ctx)
		if err != nil || len(rates) != 2 || !slices.ContainsFunc(rates, func(r inbox.Rate) bool {
			return r.Scope == inbox.LimitPerKey && r.Key == max && r.Starts == 2
		}) {
			t.Fatalf("Rates = %+v, %v; want the key's and the kind's", rates, err)
		}
		must(t, "ClearRate of the key", client.ClearRate(ctx, "q", inbox.LimitPerKey, max))
		if rates, err := client.Rates(ctx); err != nil || len(rates) != 1 || rates[0].Scope != inbox.LimitPerKind {
			t.Errorf("Rates after ClearRate of the key = %+v, %v; want the kind's alone", rates, err)
		}
	})
}

// TestRatesPerKeyWithGroups: on every database, a table with FIFO groups, a limit key column and rates: key a at 2 starts per 500 ms over two
// groups of 4 rows each, three consumers of 4 workers. Every row runs and no window of 500 ms
// holds more than 2 starts: the pick reads each row's group hold and then its limit key
// (scanClaimed), where before rates per key it read the one or the other.
func TestRatesPerKeyWithGroups(t *testing.T) {
	const per = 500 * time.Millisecond
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl := b.newGroupTable(t, dbs[0])
		tbl.LimitKey, tbl.Rates = "limit_key", inbox.RatesTable
		mustExec(t, dbs[0], "ALTER TABLE "+b.q(t, tbl.Name)+" ADD "+b.q(t, tbl.LimitKey)+" VARCHAR(191) NULL")
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
		must(t, "SetRate of key a", client.SetRate(context.Background(), keyRate("a", 2, per)))
		msgs := messages("q", 8)
		for i := range msgs {
			msgs[i].LimitKey, msgs[i].GroupKey = "a", []string{"g1", "g2"}[i%2]
		}
		b.enqueue(t, dbs[0], tbl, msgs...)
		var starts collector[rateStart]
		rateConsumers(t, b, dbs, tbl, &starts, 20*time.Millisecond)
		all := starts.all()
		if len(all) != 8 {
			t.Errorf("%d starts, want 8", len(all))
		}
		if most := checkRate(t, "key a", timesOf(all, ""), 2, per); most < 2 {
			t.Errorf("key a: at most %d starts in any window of %v, want its rate (2) reached", most, per)
		}
	})
}
