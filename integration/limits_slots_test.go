package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
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
