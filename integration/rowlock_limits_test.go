package integration

import (
	"database/sql"
	"fmt"
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
// a never has more than 2 in work, key k never more than 1, and the rows under no limit are all
// done before the last row of key k starts (full limits do not hold them back) on Postgres; on
// MySQL and MariaDB, where a claim that meets a full limit after locking its row rolls back and
// claims again (rowlock/limits.go), they are not, and the test logs how they ran.
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
		// Key k runs its 20 rows one at a time: the rows under no limit, published among them,
		// are all done well before its last starts, unless the full limits held them back.
		var lastFree, lastK time.Time
		for _, r := range all {
			switch {
			case r.key == "k" && r.start.After(lastK):
				lastK = r.start
			case r.kind == "b" && r.key == "" && r.end.After(lastFree):
				lastFree = r.end
			}
		}
		if !lastFree.Before(lastK) && b.name == "postgres" {
			t.Errorf("the last row under no limit ended at %v, after the last row of key k started at %v: the full limits held it back", lastFree, lastK)
		}
		most, _ := mostAtOnce(all, func(r run) bool { return r.kind == "b" && r.key == "" })
		t.Logf("rows under no limit: at most %d at once, the last ended %v after the last of key k started", most, lastFree.Sub(lastK))
	})
}
