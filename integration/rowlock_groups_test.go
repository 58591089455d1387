package integration

import (
	"context"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The row lock form's FIFO groups: a claim holds its row's group by locking the group's row of
// inbox_groups in the claim's own transaction (rowlock/groups.go).

// rowlockGroupForm is the row lock form over tbl on b's database, at its default level.
func rowlockGroupForm(b backend, tbl inbox.Table) *rowlock.Form[rowlock.Dialect] {
	return rowlock.New(b.dialect.(rowlock.Dialect), tbl)
}

// TestRowlockGroupsLateCommitOfALowerID: a transaction publishes row N of group g and stays
// open while another publishes N+1 and commits; a claim takes N+1, and once N commits no claim
// takes N (the head of g now, in every snapshot) while N+1 is in work: the group's lock, not the
// head's id, keeps it out; rows of another group go meanwhile. After N+1 settles, N runs.
func TestRowlockGroupsLateCommitOfALowerID(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newGroupTable(t, db)
		ctx := context.Background()
		late, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer late.Rollback()
		n, err := inbox.EnqueueTxResults(ctx, late, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: "g", Payload: []byte("g/N")})
		if err != nil {
			t.Fatal(err)
		}
		next, err := inbox.EnqueueIDs(ctx, db, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: "g", Payload: []byte("g/N+1")})
		if err != nil {
			t.Fatal(err)
		}
		if next[0] <= n[0].ID {
			t.Fatalf("ids %d then %d: the test needs the later publish to take the higher id", n[0].ID, next[0])
		}
		f := openForm(t, rowlockGroupForm(b, tbl), db, inbox.Binding{Name: "q"})
		ds := claim(t, f, 1)
		if len(ds) != 1 || ds[0].ID != next[0] {
			t.Fatalf("claimed %v, want row %d alone (row %d is not committed)", deliveryIDs(ds), next[0], n[0].ID)
		}
		if err := late.Commit(); err != nil {
			t.Fatal(err)
		}
		other, err := inbox.EnqueueIDs(ctx, db, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: "h", Payload: []byte("h/0")})
		if err != nil {
			t.Fatal(err)
		}
		again := claim(t, f, 4)
		if len(again) != 1 || again[0].ID != other[0] {
			t.Fatalf("claimed %v while row %d of g is in work, want row %d of group h alone", deliveryIDs(again), next[0], other[0])
		}
		settle(t, f, again[0], outcome.Ack())
		settle(t, f, ds[0], outcome.Ack())
		if after := claim(t, f, 4); len(after) != 1 || after[0].ID != n[0].ID {
			t.Fatalf("after row %d settled claimed %v, want row %d", next[0], deliveryIDs(after), n[0].ID)
		}
	})
}

// TestRowlockGroupsPublishDoesNotWaitForAHold: while a claim holds group g (its hold row locked
// in the claim's open transaction), a publish of another row of g returns at once, and a pause
// of another group too.
func TestRowlockGroupsPublishDoesNotWaitForAHold(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newGroupTable(t, db)
		b.enqueue(t, db, tbl, inbox.Message{Queue: "q", GroupKey: "g", Payload: []byte("g/0")})
		f := openForm(t, rowlockGroupForm(b, tbl), db, inbox.Binding{Name: "q"})
		if ds := claim(t, f, 1); len(ds) != 1 {
			t.Fatalf("claimed %d rows, want the head of g", len(ds))
		}
		pctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		if err := inbox.Enqueue(pctx, db, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: "g", Payload: []byte("g/1")}); err != nil {
			t.Fatalf("publishing while the group is held: %v", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the publish took %v behind the group's hold", took)
		}
		if again := claim(t, f, 4); len(again) != 0 {
			t.Errorf("claimed %v while the head of g is in work", deliveryIDs(again))
		}
	})
}

// TestRowlockGroupsPause: a paused group's head is not claimed, other groups go; resumed, it is.
func TestRowlockGroupsPause(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newGroupTable(t, db)
		b.enqueue(t, db, tbl, inbox.Message{Queue: "q", GroupKey: "g", Payload: []byte("g/0")}, inbox.Message{Queue: "q", GroupKey: "h", Payload: []byte("h/0")})
		a, err := admin.New(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := a.PauseGroup(ctx, "q", "g"); err != nil {
			t.Fatal(err)
		}
		f := openForm(t, rowlockGroupForm(b, tbl), db, inbox.Binding{Name: "q"})
		ds := claim(t, f, 4)
		if len(ds) != 1 || groupOf(ds[0]) != "h" {
			t.Fatalf("claimed %v with g paused, want the row of h alone", deliveryIDs(ds))
		}
		if err := a.ResumeGroup(ctx, "q", "g"); err != nil {
			t.Fatal(err)
		}
		if again := claim(t, f, 4); len(again) != 1 || groupOf(again[0]) != "g" {
			t.Fatalf("claimed %v after g resumed, want its row", deliveryIDs(again))
		}
	})
}

// TestRowlockGroupsBatch: a batch claim takes the head of each free group and no second row of
// one; while the batch holds them a second batch takes nothing of those groups; once it
// settles, the next batch takes each group's next row.
func TestRowlockGroupsBatch(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newGroupTable(t, db)
		b.enqueue(t, db, tbl, groupMessages(3, 2, 0)...)
		f := openForm(t, rowlockGroupForm(b, tbl), db, inbox.Binding{Name: "q"})
		ctx := context.Background()
		first, err := f.ClaimBatch(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, d := range first {
			if seen[groupOf(d)] {
				t.Errorf("the batch holds two rows of group %s: %v", groupOf(d), deliveryIDs(first))
			}
			seen[groupOf(d)] = true
		}
		if len(first) != 3 {
			t.Fatalf("the batch claimed %v, want the 3 heads", deliveryIDs(first))
		}
		if again, err := f.ClaimBatch(ctx, 10); err != nil || len(again) != 0 {
			t.Fatalf("a second batch claimed %v (%v) while the first holds every group", deliveryIDs(again), err)
		}
		acks := make([]outcome.Outcome, len(first))
		for i := range acks {
			acks[i] = outcome.Ack()
		}
		if err := f.SettleBatch(ctx, first, acks); err != nil {
			t.Fatal(err)
		}
		next, err := f.ClaimBatch(ctx, 10)
		if err != nil || len(next) != 3 {
			t.Fatalf("after the first batch settled claimed %v (%v), want each group's second row", deliveryIDs(next), err)
		}
		for i, d := range next {
			if d.ID <= first[i].ID {
				t.Errorf("row %d after row %d: not in id order", d.ID, first[i].ID)
			}
		}
	})
}
