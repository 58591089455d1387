package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

func TestLeaseBatchOutcomes(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 0)
		tbl := withAttempt(tableName(t))
		tbl.RetryAfter = "retry_after"
		b.createTable(t, db, tbl)
		name := b.q(t, tbl.Name)
		for i := range 6 {
			b.enqueue(t, db, tbl, inbox.Message{Payload: []byte(strconv.Itoa(i))})
		}
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{})
		ds := claimBatchN(t, f, 16, 6)
		batch, _ := inbox.HoldOf[any](ds[0])
		for _, d := range ds {
			if h, _ := inbox.HoldOf[any](d); d.Attempt != 1 || h != batch {
				t.Fatalf("row %d: attempt %d, hold shared %v; want attempt 1 and one hold for the batch", d.ID, d.Attempt, h == batch)
			}
		}
		if err := f.Settle(ctx, ds[0], outcome.Ack()); err == nil {
			t.Fatal("Settle of one delivery of a batch succeeded; want an error naming SettleBatch")
		}
		outs := []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Retry(), outcome.RetryAfter(time.Hour), outcome.RetryAfter(2 * time.Hour), outcome.Ack()}
		settleBatch(t, f, ds, outs...)
		if n := count(t, db, "SELECT COUNT(*) FROM "+name); n != 3 {
			t.Fatalf("%d rows left, want 3 (the retried and the two delayed)", n)
		}
		again := claimBatchN(t, f, 16, 1)
		if again[0].ID != ds[2].ID || again[0].Attempt != 2 {
			t.Fatalf("claimable after the batch: row %d attempt %d, want the retried row %d at attempt 2", again[0].ID, again[0].Attempt, ds[2].ID)
		}
		releaseBatch(t, f, again)
		if back := claimBatchN(t, f, 16, 1); back[0].ID != ds[2].ID || back[0].Attempt != 3 {
			t.Fatalf("after ReleaseBatch: row %d attempt %d, want row %d claimable at once (attempt 3: a lease claim counts each delivery)", back[0].ID, back[0].Attempt, ds[2].ID)
		}
		var first, second string
		q := "SELECT retry_after FROM " + name + " WHERE id = " + b.dialect.Placeholder(1)
		if err := db.QueryRow(q, ds[3].ID).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(q, ds[4].ID).Scan(&second); err != nil {
			t.Fatal(err)
		}
		if !(first < second) {
			t.Fatalf("retry_after of the two delayed rows: %q and %q, want the one-hour delay first", first, second)
		}
	})
}

// ackTakenBatch acks, with a lease consumer for queue q, a batch of three rows whose lease ran
// out after another consumer took one of them. It returns the batch, how many rows the table
// held after the settlement and the settlement's error; the other consumer then acks its row.
func ackTakenBatch(t *testing.T, b backend, q inbox.Binding) (batch []*inbox.Delivery, left int, err error) {
	t.Helper()
	db, tbl, mine, theirs := leaseContended(t, b, 3, q)
	batch, taken := batchTaken(t, mine, theirs, 3, 1)
	err = mine.SettleBatch(context.Background(), batch, repeated(outcome.Ack(), 3))
	left = b.countRows(t, db, tbl, "")
	settle(t, theirs, taken[0], outcome.Ack())
	return batch, left, err
}

func TestLeaseBatchLostLeaseSettlesTheRest(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		_, left, err := ackTakenBatch(t, b, inbox.Binding{})
		if !errors.Is(err, inbox.ErrLeaseLost) {
			t.Fatalf("SettleBatch with a row taken by another consumer: %v, want ErrLeaseLost", err)
		}
		if left != 1 {
			t.Fatalf("%d rows left, want 1: the rows still holding the batch's token settle, the taken one stays", left)
		}
	})
}

// TestLeaseBatchLostRowsNamed: of a batch whose lease ran out, another consumer takes two rows
// (one to be acked, one retried) and leaves two. The settlement changes the two left (their
// token still holds) and names exactly the two taken, in its text and in a
// *inbox.LeaseLostError, which still matches ErrLeaseLost.
func TestLeaseBatchLostRowsNamed(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl, mine, theirs := leaseContended(t, b, 4, inbox.Binding{})
		ds, taken := batchTaken(t, mine, theirs, 4, 2)
		lost := []int64{ds[0].ID, ds[1].ID}
		if got := deliveryIDs(taken); !slices.Equal(got, lost) {
			t.Fatalf("the other consumer took %v, want %v", got, lost)
		}
		err := mine.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Ack(), outcome.Retry(), outcome.Ack(), outcome.Retry()})
		if !errors.Is(err, inbox.ErrLeaseLost) {
			t.Fatalf("SettleBatch with two rows taken by another consumer: %v, want ErrLeaseLost", err)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(lost)) {
			t.Errorf("the error does not name the rows not changed, %v: %v", lost, err)
		}
		var lle *inbox.LeaseLostError
		if !errors.As(err, &lle) || !slices.Equal(lle.IDs, lost) || lle.Table != tbl.Name {
			t.Errorf("errors.As(%v): %+v, want a *inbox.LeaseLostError of table %q with IDs %v", err, lle, tbl.Name, lost)
		}
		name := b.q(t, tbl.Name)
		if n := count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE id = "+strconv.FormatInt(ds[2].ID, 10)); n != 0 {
			t.Errorf("row %d, acked under a token still held, is still there", ds[2].ID)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE locked_until IS NULL AND id = "+strconv.FormatInt(ds[3].ID, 10)); n != 1 {
			t.Errorf("row %d, retried under a token still held, still holds a lease", ds[3].ID)
		}
		for _, d := range taken {
			settle(t, theirs, d, outcome.Ack())
		}
	})
}

// TestLeaseBatchTransactionalLostRowsNamed: in transactional mode a batch of acks settles whole
// or not at all, so when another consumer took one of its rows, none settles and the
// *inbox.LeaseLostError names every row of the batch.
func TestLeaseBatchTransactionalLostRowsNamed(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ds, left, err := ackTakenBatch(t, b, inbox.Binding{Transactional: true})
		var lle *inbox.LeaseLostError
		if !errors.Is(err, inbox.ErrLeaseLost) || !errors.As(err, &lle) || !slices.Equal(lle.IDs, deliveryIDs(ds)) {
			t.Fatalf("SettleBatch of acks with a row taken: %v (%+v), want a *inbox.LeaseLostError naming every row, %v", err, lle, deliveryIDs(ds))
		}
		if left != 3 {
			t.Fatalf("%d rows left, want all 3: a transactional batch of acks settles whole or not at all", left)
		}
	})
}

func TestLeaseBatchExtendRenewsEveryRow(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		_, _, mine, theirs := leaseContended(t, b, 3, inbox.Binding{})
		ds := claimBatchN(t, mine, 16, 3)
		for range 3 {
			time.Sleep(500 * time.Millisecond)
			if err := mine.Extend(context.Background(), ds[0]); err != nil {
				t.Fatalf("Extend: %v", err)
			}
		}
		if got := claim(t, theirs, 3); len(got) != 0 {
			t.Fatalf("another consumer claimed %v after 1.5 s of a 1 s lease extended every 0.5 s; want nothing", deliveryIDs(got))
		}
		settleBatch(t, mine, ds, outcome.Ack(), outcome.Ack(), outcome.Ack())
	})
}

func TestLeaseBatchTransactional(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, withAttempt)
		side := b.scratchTable(t, db, tbl.Name+"_side", "id BIGINT")
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{Transactional: true})
		// handle claims the table's three rows in a batch, writes a side row for each through the
		// batch's transaction and settles the batch with outs; it returns the batch, and how many
		// writes landed and rows were left after.
		handle := func(outs ...outcome.Outcome) (ds []*inbox.Delivery, writes, left int) {
			t.Helper()
			ds = claimBatchN(t, f, 16, 3)
			for _, d := range ds {
				if _, err := d.Tx.ExecContext(context.Background(), "INSERT INTO "+side+" (id) VALUES ("+strconv.FormatInt(d.ID, 10)+")"); err != nil {
					t.Fatal(err)
				}
			}
			settleBatch(t, f, ds, outs...)
			return ds, count(t, db, "SELECT COUNT(*) FROM "+side), b.countRows(t, db, tbl, "")
		}
		for range 3 {
			b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("p")})
		}

		// One Retry in the batch: every write rolls back, and the acks are retried too.
		_, writes, left := handle(outcome.Ack(), outcome.Retry(), outcome.Ack())
		if writes != 0 {
			t.Fatalf("%d writes landed from a batch with a retry, want none", writes)
		}
		if left != 3 {
			t.Fatalf("%d rows left after a batch with a retry, want all 3 back", left)
		}

		// Every outcome Ack: the writes commit with the settlements.
		ds, writes, left := handle(repeated(outcome.Ack(), 3)...)
		for _, d := range ds {
			if d.Attempt != 2 {
				t.Fatalf("row %d redelivered at attempt %d, want 2", d.ID, d.Attempt)
			}
		}
		if writes != 3 {
			t.Fatalf("%d writes landed from an acked batch, want 3", writes)
		}
		if left != 0 {
			t.Fatalf("%d rows left after an acked batch, want 0", left)
		}
	})
}

func TestLeaseBatchConsumersDrain(t *testing.T) {
	for _, transactional := range []bool{false, true} {
		rows := 3000
		if transactional {
			rows = 600
		}
		for _, b := range backends(t, true) {
			t.Run(b.name+"/transactional="+strconv.FormatBool(transactional), func(t *testing.T) {
				dbs := b.openDBs(t, 2, 16)
				db1, db2 := dbs[0], dbs[1]
				tbl := b.newTable(t, db1, withAttempt)
				b.enqueue(t, db1, tbl, messages("", rows)...)
				side := b.scratchTable(t, db1, tbl.Name+"_side", "id BIGINT")

				var (
					handled rowCounts
					mu      sync.Mutex
					largest int
				)
				h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
					outs := make([]outcome.Outcome, len(ds))
					for i, d := range ds {
						if transactional {
							if _, err := d.Tx.ExecContext(ctx, "INSERT INTO "+side+" (id) VALUES ("+strconv.FormatInt(d.ID, 10)+")"); err != nil {
								t.Errorf("write through the batch's transaction: %v", err)
								return nil
							}
						}
						outs[i] = outcome.Ack()
					}
					handled.add(ds...)
					mu.Lock()
					defer mu.Unlock()
					largest = max(largest, len(ds))
					return outs
				})
				cfg := &inbox.Config{Retry: inbox.RetryAtOnce, Workers: 4, PollInterval: 20 * time.Millisecond, Logger: testLogger(t), Transactional: transactional}
				drainTable(t, b, db1, tbl, 3*time.Minute, "the table to drain",
					inbox.NewBatchConsumer(db1, lease.New(b.dialect, tbl, nil), 16, h, cfg),
					inbox.NewBatchConsumer(db2, lease.New(b.dialect, tbl, nil), 16, h, cfg))
				handled.checkOnce(t, "handled", rows)
				mu.Lock()
				defer mu.Unlock()
				if largest > 16 || largest < 2 {
					t.Errorf("the largest batch held %d rows, want between 2 and 16", largest)
				}
				if transactional {
					if n := count(t, db1, "SELECT COUNT(DISTINCT id) FROM "+side); n != rows {
						t.Errorf("%d rows' writes landed, want %d", n, rows)
					}
					if n := count(t, db1, "SELECT COUNT(*) FROM "+side); n != rows {
						t.Errorf("%d writes landed, want one per row (%d)", n, rows)
					}
				}
			})
		}
	}
}
