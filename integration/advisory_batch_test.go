package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// advisoryDrainLimit bounds a drain's wait: generous enough on a machine shared with other test
// runs (a few seconds on a quiet one).
const advisoryDrainLimit = 90 * time.Second

// TestAdvisoryBatchDrain drains 2,000 rows with two batch consumers (each with its own pool) of
// four workers each: every row is handled exactly once.
func TestAdvisoryBatchDrain(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		const rows = 2000
		b.enqueue(t, db, tbl, messages("q", rows)...)

		var (
			handled rowCounts
			mu      sync.Mutex
			biggest int
		)
		h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
			mu.Lock()
			biggest = max(biggest, len(ds))
			mu.Unlock()
			handled.add(ds...)
			return repeated(outcome.Ack(), len(ds))
		})
		advisoryDrain(t, b, db, tbl, &handled, rows, advisoryDrainLimit, func(pool *sql.DB) *inbox.Consumer {
			f := batchForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}"))
			return inbox.NewBatchConsumer(pool, f, 32, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 10 * time.Millisecond})
		})
		mu.Lock()
		defer mu.Unlock()
		if biggest < 2 {
			t.Errorf("no batch held more than %d row", biggest)
		}
	})
}

// TestAdvisoryBatchAccountsNeverShared runs two batch consumers over a key on an account column:
// no two batches, of one consumer or of both, ever hold rows of one account at once, a batch
// holds one row per account, and every row is handled exactly once.
func TestAdvisoryBatchAccountsNeverShared(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		if shared := advisoryAccountsApart(t, b, accountsApart{accounts: 12, rows: 600, batch: 8, workers: 3, limit: advisoryDrainLimit}); shared == 0 {
			t.Error("no batch held more than one account")
		}
	})
}

// TestAdvisoryBatchOutcomes settles one batch with an outcome of each kind, two RetryAfter
// delays among them: each row settles by its own, another consumer finds the batch's keys held
// until then, and a delivery of the batch cannot be settled alone.
func TestAdvisoryBatchOutcomes(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		b.enqueue(t, db, tbl, messages("q", 6)...)
		b.enqueue(t, db, tbl, messages("other", 1)...)

		f := openForm(t, batchForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}")), db, inbox.Binding{Name: "q"})
		ds := claimBatchN(t, f, 10, 6) // the queue's rows
		for i, d := range ds {
			if want := fmt.Sprintf("m%d", i+1); string(d.Payload) != want || d.Attempt != 1 || d.Queue != "q" {
				t.Fatalf("delivery %d: payload %q attempt %d group %q; want %q, 1, q (claim order)", i, d.Payload, d.Attempt, d.Queue, want)
			}
		}
		other := openForm(t, batchForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}")), db, inbox.Binding{Name: "q"})
		if got := claimBatch(t, other, 10); len(got) != 0 {
			t.Fatalf("a second consumer claimed %v while the batch held every row", deliveryIDs(got))
		}
		if err := f.Settle(context.Background(), ds[0], outcome.Ack()); err == nil || errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("Settle on a delivery of a batch: %v, want an error pointing to SettleBatch", err)
		}
		if err := f.Extend(context.Background(), ds[5]); err != nil {
			t.Fatalf("Extend on a delivery of the batch: %v", err)
		}

		outs := []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Retry(), outcome.RetryAfter(time.Hour), outcome.RetryAfter(2 * time.Hour), outcome.Ack()}
		settleBatch(t, f, ds, outs...)
		name := b.q(t, tbl.Name)
		id := func(i int) int64 { return ds[i].ID }
		if n := count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE processed_at IS NOT NULL AND id IN ("+b.placeholders(3)+")", id(0), id(1), id(5)); n != 3 {
			t.Fatalf("ack, drop and ack stamped %d rows, want 3", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE processed_at IS NOT NULL"); n != 3 {
			t.Fatalf("%d rows stamped, want only the batch's 3 acks and drops", n)
		}
		settledAt := time.Now()
		for i, delay := range map[int]time.Duration{3: time.Hour, 4: 2 * time.Hour} {
			p := b.dialect.Placeholder
			sel := "SELECT COUNT(*) FROM " + name + " WHERE id = " + p(1) + " AND retry_after BETWEEN " + p(2) + " AND " + p(3)
			lo, hi := b.dialect.Time(settledAt.Add(delay-time.Minute)), b.dialect.Time(settledAt.Add(delay+time.Minute))
			if n := count(t, db, sel, id(i), lo, hi); n != 1 {
				t.Fatalf("row %d: retry_after not %v after the settlement: each delay is its own", id(i), delay)
			}
		}
		if err := f.SettleBatch(context.Background(), ds, outs); !errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("settling a batch twice: %v, want ErrClosed", err)
		}

		// The retried row comes back at once, its attempt counted by the take; the delayed
		// rows do not.
		again := claimBatch(t, other, 10)
		if len(again) != 1 || again[0].ID != id(2) || again[0].Attempt != 2 {
			t.Fatalf("after the batch claimed %v, want row %d at attempt 2", deliveryIDs(again), id(2))
		}
		settleBatch(t, other, again, outcome.Ack())
	})
}

// TestAdvisoryBatchTransactional: the batch's deliveries share one transaction; a batch of Acks
// commits the handler's writes with the settlements, and a batch with one Retry rolls them all
// back and retries its Acks.
func TestAdvisoryBatchTransactional(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		side := b.scratchTable(t, db, tbl.Name+"_side", "id BIGINT PRIMARY KEY")
		insert := "INSERT INTO " + side + " (id) VALUES (" + b.dialect.Placeholder(1) + ")"
		b.enqueue(t, db, tbl, messages("q", 6)...)

		f := openForm(t, batchForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}")), db, inbox.Binding{Name: "q", Transactional: true})
		handle := func(ds []*inbox.Delivery) {
			t.Helper()
			for _, d := range ds {
				if d.Tx == nil {
					t.Fatal("no transaction lent in transactional mode")
				}
				if _, err := d.Tx.ExecContext(context.Background(), insert, d.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
		processed := func() int {
			return count(t, db, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE processed_at IS NOT NULL")
		}

		acks := claimBatchN(t, f, 3, 3)
		handle(acks)
		settleBatch(t, f, acks, repeated(outcome.Ack(), 3)...)
		if n := count(t, db, "SELECT COUNT(*) FROM "+side); n != 3 {
			t.Fatalf("%d handler writes committed, want the batch's 3", n)
		}
		if n := processed(); n != 3 {
			t.Fatalf("%d rows settled, want the 3 acked with their writes", n)
		}

		mixed := claimBatchN(t, f, 3, 3) // the other 3
		handle(mixed)
		settleBatch(t, f, mixed, outcome.Ack(), outcome.Retry(), outcome.Ack())
		if _, err := mixed[0].Tx.ExecContext(context.Background(), insert, -1); !errors.Is(err, inbox.ErrTransactionHeld) {
			t.Fatalf("the transaction after settlement: %v, want ErrTransactionHeld", err)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+side); n != 3 {
			t.Fatalf("%d handler writes committed, want none of the batch with a Retry (3 before)", n)
		}
		if n := processed(); n != 3 {
			t.Fatalf("%d rows settled, want none of the batch with a Retry (3 before)", n)
		}
		again := claimBatch(t, f, 3)
		checkClaimed(t, again, deliveryIDs(mixed), 2, "after a batch with a Retry (the whole batch back, its Acks retried)")
		releaseBatch(t, f, again)
	})
}

// TestAdvisoryBatchReleaseAndClose: ReleaseBatch and Close give a batch's rows back at once, to
// another consumer, their attempts counted.
func TestAdvisoryBatchReleaseAndClose(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		b.enqueue(t, db, tbl, messages("q", 3)...)

		f := openForm(t, batchForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}")), db, inbox.Binding{Name: "q"})
		other := openForm(t, batchForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}")), db, inbox.Binding{Name: "q"})

		ds := claimBatchN(t, f, 3, 3)
		if err := f.Release(context.Background(), ds[0]); err == nil || errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("Release on a delivery of a batch: %v, want an error pointing to ReleaseBatch", err)
		}
		releaseBatch(t, f, ds)
		back := claimBatch(t, other, 3)
		if !slices.Equal(deliveryIDs(back), deliveryIDs(ds)) || back[0].Attempt != 2 {
			t.Fatalf("after ReleaseBatch another consumer claimed %v, want %v at attempt 2", deliveryIDs(back), deliveryIDs(ds))
		}

		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		if err := other.SettleBatch(context.Background(), back, repeated(outcome.Ack(), 3)); !errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("SettleBatch after Close: %v, want ErrClosed", err)
		}
		last := claimBatch(t, f, 3)
		if !slices.Equal(deliveryIDs(last), deliveryIDs(ds)) || last[0].Attempt != 3 {
			t.Fatalf("after Close claimed %v, want %v at attempt 3", deliveryIDs(last), deliveryIDs(ds))
		}
		settleBatch(t, f, last, repeated(outcome.Ack(), 3)...)
	})
}
