package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// TestLimitsStaleSlotsRemoved: SetLimit and ClearLimit remove the slots no limit needs and no
// row holds (a cleared limit's, and those at or above a lowered limit, whose holder's lease has
// run out), and keep every slot whose holder's lease runs (of a cleared limit too) and the free
// slots below a limit that is set, which claims reuse. Once the held slot's lease has run out,
// the next call removes it too.
func TestLimitsStaleSlotsRemoved(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.openDBs(t, 1, 4)[0]
		tbl := b.newLimitTable(t, db)
		ctx := context.Background()
		b.enqueue(t, db, tbl, limitMessages(4, "a", "")...)
		var ids []int64
		var id int64
		forRows(t, db, "SELECT "+b.q(t, tbl.ID)+" FROM "+b.q(t, tbl.Name)+" ORDER BY "+b.q(t, tbl.ID), nil, func() { ids = append(ids, id) }, &id)
		held, free := ids[0], ids[1] // ids[0]'s lease runs for an hour; the others' never ran
		now := time.Now().UTC().Truncate(time.Microsecond)
		mustExec(t, db, "UPDATE "+b.q(t, tbl.Name)+" SET "+b.q(t, tbl.LockedUntil)+" = "+b.dialect.Placeholder(1)+" WHERE "+b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(2), b.dialect.Time(now.Add(time.Hour)), held)
		b.setLimit(t, db, tbl, inbox.LimitPerKey, "gone", 2)
		b.setLimit(t, db, tbl, inbox.LimitPerKey, "kept", 3)
		slot := func(key string, n int, holder int64) {
			mustExec(t, db, "INSERT INTO inbox_slots (table_name, queue, scope, limit_key, slot, holder_id, holder_token) VALUES ("+b.placeholders(7)+")",
				tbl.Name, "q", string(inbox.LimitPerKey), key, n, holder, b.dialect.Time(now))
		}
		slot("gone", 0, free)    // a cleared limit's free slot: removed
		slot("gone", 1, held)    // a cleared limit's held slot: kept while its lease runs
		slot("kept", 0, free)    // a free slot below the limit: kept, claims reuse it
		slot("kept", 1, held)    // a held slot below the limit: kept
		slot("kept", 2, ids[2])  // free, at the limit once lowered to 2: removed then
		slot("kept", 3, ids[3])  // free, at the limit of 3: removed at once
		slot("orphan", 0, 1<<40) // a slot of a limit never set, naming no row: removed
		left := func() []string {
			var out []string
			var key string
			var n int
			forRows(t, db, "SELECT limit_key, slot FROM inbox_slots WHERE table_name = "+b.dialect.Placeholder(1)+" ORDER BY limit_key, slot", []any{tbl.Name},
				func() { out = append(out, fmt.Sprintf("%s/%d", key, n)) }, &key, &n)
			return out
		}
		c, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ClearLimit(ctx, "q", inbox.LimitPerKey, "gone"); err != nil {
			t.Fatal(err)
		}
		if got, want := left(), []string{"gone/1", "kept/0", "kept/1", "kept/2"}; !slices.Equal(got, want) {
			t.Errorf("after ClearLimit the slots are %v, want %v", got, want)
		}
		if err := c.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerKey, Key: "kept", Max: 2}); err != nil {
			t.Fatal(err)
		}
		if got, want := left(), []string{"gone/1", "kept/0", "kept/1"}; !slices.Equal(got, want) {
			t.Errorf("after SetLimit lowered the limit to 2 the slots are %v, want %v", got, want)
		}
		// The held row's lease runs out: its slot of the cleared limit goes at the next call.
		mustExec(t, db, "UPDATE "+b.q(t, tbl.Name)+" SET "+b.q(t, tbl.LockedUntil)+" = NULL")
		if err := c.ClearLimit(ctx, "q", inbox.LimitPerKey, "gone"); err != nil {
			t.Fatal(err)
		}
		if got, want := left(), []string{"kept/0", "kept/1"}; !slices.Equal(got, want) {
			t.Errorf("once the holder's lease ran out the slots are %v, want %v", got, want)
		}
	})
}

// TestLimitsSlotsRemovedWhileClaiming: while three consumers of 4 workers drain rows of a kind
// limited to 3, the limit goes from 3 to 2 and back every few milliseconds, each SetLimit
// removing the slots at or above the limit it leaves that it reads free, as claims take them
// again: the runs, recorded and sampled every 5 ms, never number more than 3 at once. A removal
// that took a slot a claim had taken since its read would let another claim take the number
// again, a fourth row in work.
func TestLimitsSlotsRemovedWhileClaiming(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		// SQLite's claims and changes take its one writer in turn, under -race tens of
		// milliseconds each: 240 rows there took over a minute on a loaded machine.
		rows := 240
		if b.dialect.Caps().OneWriter {
			rows = 80
		}
		dbs := b.openDBs(t, 4, 8)
		tbl := b.newLimitTable(t, dbs[0])
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerKind, "a", 3)
		b.enqueue(t, dbs[0], tbl, limitMessages(rows, "a", "")...)
		h := &recorder{pause: 5 * time.Millisecond}
		stop := sampled(h.inWork)
		c, err := inbox.NewClient(dbs[3], b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		toggled := make(chan int)
		ctx, cancel := context.WithCancel(context.Background())
		// On SQLite every change waits for the one writer, which the three pools' claims and
		// settlements take in turn: changes there come slower, and one that waited out the busy
		// timeout (SQLITE_BUSY, on a machine loaded by -race) is tried again.
		pause := 3 * time.Millisecond
		if b.dialect.Caps().OneWriter {
			pause = 50 * time.Millisecond
		}
		go func() {
			n := 0
			defer func() { toggled <- n }()
			for ctx.Err() == nil {
				for _, max := range []int{2, 3} {
					err := c.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerKind, Key: "a", Max: max})
					if err != nil && ctx.Err() == nil && !(b.dialect.Caps().OneWriter && strings.Contains(err.Error(), "SQLITE_BUSY")) {
						t.Errorf("SetLimit: %v", err)
						return
					}
					n++
					time.Sleep(pause)
				}
			}
		}()
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", limitConsumers(t, b, dbs[:3], tbl, 4, h)...)
		cancel()
		t.Logf("%d limit changes while %d rows ran", <-toggled, rows)
		if most := stop(); most > 3 {
			t.Errorf("the sampler saw %d rows in work at once, over the limit of 3", most)
		}
		all := h.runs.all()
		if len(all) != rows {
			t.Errorf("%d runs, want %d (each row once)", len(all), rows)
		}
		if most, at := mostAtOnce(all, func(run) bool { return true }); most > 3 {
			t.Errorf("%d rows in work at once at %v, over the limit of 3", most, at)
		}
	})
}

// TestLimitsSlotDropComparesItsHolder: the removal of a slot read free (sqltext.Limits.Drop)
// deletes nothing where a claim took the slot since the read (its holder and token changed),
// and deletes it where they are still the ones read.
func TestLimitsSlotDropComparesItsHolder(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.openDBs(t, 1, 4)[0]
		tbl := b.newLimitTable(t, db)
		q, err := tbl.Quote(b.dialect)
		if err != nil {
			t.Fatal(err)
		}
		drop := sqltext.New(b.dialect.Caps(), sqltext.Table(q)).Limits().Drop()
		read := time.Now().UTC().Truncate(time.Microsecond)
		mustExec(t, db, "INSERT INTO inbox_slots (table_name, queue, scope, limit_key, slot, holder_id, holder_token) VALUES ("+b.placeholders(7)+")",
			tbl.Name, "q", string(inbox.LimitPerKey), "k", 2, 7, b.dialect.Time(read))
		// A claim takes the slot after the read: a new holder and token.
		taken := read.Add(time.Minute)
		mustExec(t, db, "UPDATE inbox_slots SET holder_id = 8, holder_token = "+b.dialect.Placeholder(1)+" WHERE table_name = "+b.dialect.Placeholder(2), b.dialect.Time(taken), tbl.Name)
		dropped := func(holder int64, token time.Time) int64 {
			v := sqltext.Values{Table: tbl.Name, Queue: "q", Scope: string(inbox.LimitPerKey), LimitKey: "k", Slot: 2, Holder: holder, Tokens: []any{b.dialect.Time(token)}}
			res, err := db.Exec(drop.SQL, drop.Bind(nil, &v)...)
			if err != nil {
				t.Fatal(err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := dropped(7, read); n != 0 {
			t.Errorf("the removal of the slot as read deleted %d rows, after a claim took it: want none", n)
		}
		if n := dropped(8, taken); n != 1 {
			t.Errorf("the removal of the slot as it is deleted %d rows, want 1", n)
		}
	})
}

// TestLimitsSetWhereNoSlotIsKept: SetLimit and ClearLimit of a table with no slot rows the lease
// form holds (none, as the advisory form's, whose slots are locks; or the row lock form's, which
// name holder 0 and are held by their row lock) read no lease column for stale slots, and
// remove none of the row lock form's: they succeed on a description whose lease column the
// table lacks, and the row lock slot stays.
func TestLimitsSetWhereNoSlotIsKept(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.openDBs(t, 1, 4)[0]
		tbl := b.newLimitTable(t, db)
		tbl.LockedUntil = "no_lease_here"
		c, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, rowLockSlot := range []bool{false, true} {
			if rowLockSlot {
				mustExec(t, db, "INSERT INTO inbox_slots (table_name, queue, scope, limit_key, slot, holder_id, holder_token) VALUES ("+b.placeholders(7)+")",
					tbl.Name, "q", string(inbox.LimitPerQueue), "", 1, 0, b.dialect.Time(time.Now().UTC().Truncate(time.Microsecond)))
			}
			if err := c.SetLimit(ctx, inbox.Limit{Queue: "q", Scope: inbox.LimitPerQueue, Max: 1}); err != nil {
				t.Errorf("SetLimit (a row lock slot there: %v): %v", rowLockSlot, err)
			}
			if err := c.ClearLimit(ctx, "q", inbox.LimitPerQueue, ""); err != nil {
				t.Errorf("ClearLimit (a row lock slot there: %v): %v", rowLockSlot, err)
			}
		}
		var n int
		forRows(t, db, "SELECT COUNT(*) FROM inbox_slots WHERE table_name = "+b.dialect.Placeholder(1), []any{tbl.Name}, func() {}, &n)
		if n != 1 {
			t.Errorf("%d slot rows left, want the row lock form's one kept", n)
		}
	})
}
