package integration

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/rowlock"
)

// The row lock form's concurrency limits: a row in work under a limit holds a slot of it by a
// row lock on the slot's row of inbox_slots, taken in the claim's own transaction
// (rowlock/limits.go).

// rowlockLimitConsumers is limitConsumers with the row lock form.
func rowlockLimitConsumers(t *testing.T, b backend, dbs []*sql.DB, tbl inbox.Table, workers int, h inbox.Handler) []*inbox.Consumer {
	var cs []*inbox.Consumer
	for _, db := range dbs {
		cs = append(cs, inbox.NewConsumer(db, rowlock.New(b.dialect.(rowlock.Dialect), tbl), h, &inbox.Config{Queue: "q", Workers: workers, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)}))
	}
	return cs
}

// TestRowlockLimitsPerQueue: TestLimitsPerQueue in the row lock form: three consumers of 4
// workers on pools of their own drain 60 rows of a queue limited to 3 in work; the runs,
// recorded and sampled every 5 ms, never number more than 3 at once, and reach 3.
func TestRowlockLimitsPerQueue(t *testing.T) {
	const consumers, workers, rows, limit = 3, 4, 60, 3
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, consumers, 8)
		tbl := b.newLimitTable(t, dbs[0])
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerQueue, "", limit)
		b.enqueue(t, dbs[0], tbl, limitMessages(rows, "a", "")...)
		h := &recorder{pause: 10 * time.Millisecond, press: press{want: limit}}
		stop := sampled(h.inWork)
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", rowlockLimitConsumers(t, b, dbs, tbl, workers, h)...)
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
	})
}

// TestRowlockLimitsPerKindAndKey: TestLimitsPerKindAndKey in the row lock form: kind a limited
// to 2, key k to 1, rows of kind b without a key beside them; three consumers of 4 workers. Kind
// a never has more than 2 in work, key k never more than 1, and every row runs once; how the
// rows under no limit ran beside key k is logged.
func TestRowlockLimitsPerKindAndKey(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
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
		stop := sampled(h.inWork)
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", rowlockLimitConsumers(t, b, dbs, tbl, 4, h)...)
		t.Logf("the sampler saw at most %d rows in work at once", stop())
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
		// Whether full limits hold the rows under none back is TestRowlockFullLimitHoldsBackNoOther's
		// to prove, by order rather than by time: here key k's 20 rows of 10 ms leave too little
		// time to tell on a loaded machine (the rows under no limit once ended 9 ms after k's last
		// started). How they ran is logged.
		var lastFree, lastK time.Time
		for _, r := range all {
			switch {
			case r.key == "k" && r.start.After(lastK):
				lastK = r.start
			case r.kind == "b" && r.key == "" && r.end.After(lastFree):
				lastFree = r.end
			}
		}
		most, _ := mostAtOnce(all, func(r run) bool { return r.kind == "b" && r.key == "" })
		t.Logf("rows under no limit: at most %d at once, the last ended %v after the last of key k started", most, lastFree.Sub(lastK))
	})
}

// TestRowlockFullLimitHoldsBackNoOther: the row lock form's TestAdvisoryFullLimitHoldsBackNoOther.
// 1,100 rows of key k (limit 1, 100 ms each) lead the
// queue, 10 rows of no key follow, and one row lock consumer of 8 workers claims them: every
// row of no key has started before the eleventh row of k starts (7 workers take the 10 rows in
// two turns of 100 ms, while k runs one row at a time). More rows of k lead than one claim
// reads candidates (sqltext.PickPage times pickPages), so a claim that only passed them over
// one by one, reading each one's limits, never reached the rows of no key until k was nearly
// drained: pg-boss#871's bug, a full key starving the queue. The test stops once the rows of no
// key ran or k ran 20 rows, whichever comes first, rather than drain k at 10 rows a second.
func TestRowlockFullLimitHoldsBackNoOther(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		checkFullLimitHoldsBackNoOther(t, b, func(dbs []*sql.DB, tbl inbox.Table, h *recorder) *inbox.Consumer {
			return rowlockLimitConsumers(t, b, dbs, tbl, 8, h)[0]
		})
	})
}

// checkFullLimitHoldsBackNoOther enqueues 1,100 rows of key k under a limit of 1 and, behind
// them, 10 rows of no key, and runs the consumer of 8 workers that consumer makes over a pool
// of 10 connections, its handler h pausing 100 ms a row, until the rows of no key or 20 rows of
// k have run: it fails unless every row of no key ran, and started before the eleventh row of k.
func checkFullLimitHoldsBackNoOther(t *testing.T, b backend, consumer func(dbs []*sql.DB, tbl inbox.Table, h *recorder) *inbox.Consumer) {
	const keyed, free = 1100, 10
	dbs := b.openDBs(t, 1, 10)
	tbl := b.newLimitTable(t, dbs[0])
	b.setLimit(t, dbs[0], tbl, inbox.LimitPerKey, "k", 1)
	b.enqueue(t, dbs[0], tbl, append(limitMessages(keyed, "b", "k"), limitMessages(free, "b", "")...)...)
	h := &recorder{pause: 100 * time.Millisecond}
	split := func() (k, none []time.Time) {
		for _, r := range h.runs.all() {
			if r.key == "k" {
				k = append(k, r.start)
			} else {
				none = append(none, r.start)
			}
		}
		slices.SortFunc(k, time.Time.Compare)
		return k, none
	}
	stop := startConsumer(t, consumer(dbs, tbl, h))
	waitFor(t, time.Minute, "the rows of no key, or 20 rows of k, run", func() bool {
		k, none := split()
		return len(none) == free || len(k) >= 20
	})
	stop()
	k, none := split()
	if len(none) != free {
		t.Fatalf("%d rows of k ran, and %d of the %d rows of no key: the full limit held them back", len(k), len(none), free)
	}
	if last := slices.MaxFunc(none, time.Time.Compare); len(k) > 10 && !last.Before(k[10]) {
		t.Errorf("the last row of no key started %v after the eleventh of k: the full limit held it back", last.Sub(k[10]))
	}
}

// TestRowlockManyFullLimitsHoldBackNoOther: 10 keys, each limited to 1, lead the queue with 4
// rows each, interleaved, 8 rows of no key follow, and three row lock consumers of 6 workers
// claim them, each row for 2 s: 10 workers hold the keys' slots, and the others pass over all 10
// full keys, one rollback each (some 8 round trips each: on a loaded machine that took up to 2 s
// on MariaDB), to reach the rows of no key, which all start before the third row of any key. (While every rollback counted against a claim's 8 runs, a claim gave
// up after 8 full keys, and the rows of no key waited for the keys to drain.) A row of each key
// is drained first, so that the keys' slot rows are there: a claim that adds one runs again too.
func TestRowlockManyFullLimitsHoldBackNoOther(t *testing.T) {
	const keys, each, free = 10, 4, 8
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl := b.newLimitTable(t, dbs[0])
		msgs := func(n int) []inbox.Message {
			var out []inbox.Message
			for i := range n * keys {
				out = append(out, limitMessages(1, "b", fmt.Sprint("k", i%keys))...)
			}
			return out
		}
		for k := range keys {
			b.setLimit(t, dbs[0], tbl, inbox.LimitPerKey, fmt.Sprint("k", k), 1)
		}
		b.enqueue(t, dbs[0], tbl, msgs(1)...)
		drainTable(t, b, dbs[0], tbl, time.Minute, "the keys' slot rows added", rowlockLimitConsumers(t, b, dbs, tbl, 6, &recorder{})...)
		b.enqueue(t, dbs[0], tbl, append(msgs(each), limitMessages(free, "b", "")...)...)
		h := &recorder{pause: 2 * time.Second}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", rowlockLimitConsumers(t, b, dbs, tbl, 6, h)...)
		starts := map[string][]time.Time{}
		for _, r := range h.runs.all() {
			starts[r.key] = append(starts[r.key], r.start)
		}
		if len(starts[""]) != free {
			t.Fatalf("%d runs of no key, want %d", len(starts[""]), free)
		}
		last := slices.MaxFunc(starts[""], time.Time.Compare)
		for k := range keys {
			key := fmt.Sprint("k", k)
			slices.SortFunc(starts[key], time.Time.Compare)
			if len(starts[key]) != each {
				t.Fatalf("%d runs of key %s, want %d", len(starts[key]), key, each)
			}
			if !last.Before(starts[key][2]) {
				t.Errorf("the last row of no key started %v after the third of key %s: the full limits held it back", last.Sub(starts[key][2]), key)
			}
		}
	})
}
