package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// rowlockBatchSetup is rowlockSetup on the full table less processed_at, so that Ack and Drop
// delete their rows.
func rowlockBatchSetup(t *testing.T, b backend, pool int) rowlockCell {
	t.Helper()
	db := b.open(t, pool)
	tbl := fullTable(tableName(t))
	tbl.ProcessedAt = ""
	b.createTable(t, db, tbl)
	return rowlockCell{b, db, tbl}
}

func (c rowlockCell) batchForm(t *testing.T, q inbox.Queue) inbox.BatchForm {
	t.Helper()
	return batchForm(t, c.form(t, q))
}

// TestRowlockBatchDrain: three batch consumers of 3 workers each, on pools of their own, drain
// 3,000 rows in batches of 16: every row is handled exactly once and the table ends empty.
func TestRowlockBatchDrain(t *testing.T) {
	const rows, consumers, workers, size = 3000, 3, 3, 16
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			c := rowlockBatchSetup(t, b, 0)
			msgs := make([]inbox.Message, rows)
			for i := range msgs {
				msgs[i] = inbox.Message{Queue: "q", Payload: fmt.Appendf(nil, "%d", i), Priority: i % 7}
			}
			c.publish(t, msgs...)

			var (
				mu      sync.Mutex
				handled = map[int64]int{}
				largest int
			)
			h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
				mu.Lock()
				defer mu.Unlock()
				for _, d := range ds {
					handled[d.ID]++
				}
				largest = max(largest, len(ds))
				return repeated(outcome.Ack(), len(ds))
			})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range consumers {
				db := c.open(t, workers+2)
				cons := inbox.NewBatchConsumer(db, rowlock.New(b.dialect.(rowlock.Dialect), c.tbl), size, h,
					&inbox.Config{Queue: "q", Workers: workers, PollInterval: 50 * time.Millisecond, Logger: testLogger(t)})
				wg.Go(func() {
					if err := cons.Run(ctx); err != nil {
						t.Errorf("Run: %v", err)
					}
				})
			}
			for deadline := time.Now().Add(2 * time.Minute); c.rows(t, "") > 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("the consumers left %d rows after 2 minutes", c.rows(t, ""))
					break
				}
			}
			cancel()
			wg.Wait()

			mu.Lock()
			defer mu.Unlock()
			for id, n := range handled {
				if n != 1 {
					t.Errorf("row %d handled %d times", id, n)
				}
			}
			if len(handled) != rows {
				t.Errorf("%d rows handled, want %d", len(handled), rows)
			}
			if largest != size {
				t.Errorf("the largest batch held %d rows, want %d: the claims did not batch", largest, size)
			}
		})
	}
}

// TestRowlockBatchOutcomes: the outcomes of one batch land row by row: Ack and Drop delete,
// Retry counts an attempt and leaves the row claimable at once, RetryAfter counts one and hides
// the row until then.
func TestRowlockBatchOutcomes(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			c := rowlockBatchSetup(t, b, 0)
			f := c.batchForm(t, inbox.Queue{Name: "q"})
			for i := range 5 {
				c.publish(t, inbox.Message{Queue: "q", Payload: fmt.Appendf(nil, "%d", i)})
			}
			ds := claimBatch(t, f, 10)
			if len(ds) != 5 {
				t.Fatalf("ClaimBatch(10) claimed %d rows, want the 5", len(ds))
			}
			for i, d := range ds {
				if d.Attempt != 1 || string(d.Payload) != fmt.Sprint(i) || d.Queue != "q" {
					t.Fatalf("delivery %d = %+v; want attempt 1, payload %d, group q, in claim order", i, d, i)
				}
			}
			settleBatch(t, f, ds, outcome.Ack(), outcome.Drop(), outcome.Retry(), outcome.RetryAfter(time.Hour), outcome.Retry())

			id := c.q(t, "id") + " = " + c.dialect.Placeholder(1)
			for _, d := range ds[:2] {
				if n := c.rows(t, id, d.ID); n != 0 {
					t.Errorf("row %d (Ack or Drop) is still in the table", d.ID)
				}
			}
			for _, d := range ds[2:] {
				if a := c.attemptOf(t, d.ID); a != 1 {
					t.Errorf("row %d's attempt is %d after its retry, want 1", d.ID, a)
				}
			}
			later := c.dialect.Time(time.Now().Add(50 * time.Minute))
			if n := c.rows(t, id+" AND "+c.q(t, "retry_after")+" > "+c.dialect.Placeholder(2), ds[3].ID, later); n != 1 {
				t.Errorf("row %d (RetryAfter(1h)) has no retry_after about an hour ahead", ds[3].ID)
			}
			again := claimBatch(t, f, 10)
			if got, want := sortedIDs(again), []int64{ds[2].ID, ds[4].ID}; !slices.Equal(got, want) {
				t.Fatalf("the next batch holds rows %v, want the retried %v (not the one retried after an hour)", got, want)
			}
			for _, d := range again {
				if d.Attempt != 2 {
					t.Errorf("row %d delivered again with attempt %d, want 2", d.ID, d.Attempt)
				}
			}
			settleBatch(t, f, again, outcome.Ack(), outcome.Ack())
		})
	}
}

// TestRowlockBatchTransactional: the handler writes through each delivery's Tx (the batch's one
// transaction). When every row acks, the writes commit with the settlements; when one row
// retries, every write rolls back and the acked rows are retried too (attempt + 1).
func TestRowlockBatchTransactional(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			c := rowlockBatchSetup(t, b, 0)
			notes := c.q(t, c.tbl.Name+"_notes")
			mustExec(t, c.db, "DROP TABLE IF EXISTS "+notes)
			mustExec(t, c.db, "CREATE TABLE "+notes+" (row_id BIGINT NOT NULL)")
			t.Cleanup(func() { c.db.Exec("DROP TABLE IF EXISTS " + notes) })
			f := c.batchForm(t, inbox.Queue{Name: "q", Transactional: true})
			write := func(ds []*inbox.Delivery) {
				t.Helper()
				for _, d := range ds {
					if _, err := d.Tx.ExecContext(context.Background(), "INSERT INTO "+notes+" (row_id) VALUES ("+c.dialect.Placeholder(1)+")", d.ID); err != nil {
						t.Fatalf("the handler's write for row %d: %v", d.ID, err)
					}
				}
			}
			noted := func() int { return count(t, c.db, "SELECT COUNT(*) FROM "+notes) }

			c.publish(t, inbox.Message{Queue: "q"}, inbox.Message{Queue: "q"}, inbox.Message{Queue: "q"})
			ds := claimBatch(t, f, 10)
			if len(ds) != 3 {
				t.Fatalf("claimed %d rows, want 3", len(ds))
			}
			write(ds)
			settleBatch(t, f, ds, outcome.Retry(), outcome.Ack(), outcome.Ack())
			if n := noted(); n != 0 {
				t.Fatalf("a batch with a Retry kept %d of the handler's writes, want none", n)
			}
			for _, d := range ds {
				if a := c.attemptOf(t, d.ID); a != 1 {
					t.Errorf("row %d's attempt is %d after a batch with a Retry, want 1 (its Ack is retried)", d.ID, a)
				}
			}

			again := claimBatch(t, f, 10)
			if !slices.Equal(sortedIDs(again), sortedIDs(ds)) {
				t.Fatalf("after the retried batch the claim got rows %v, want %v", sortedIDs(again), sortedIDs(ds))
			}
			for _, d := range again {
				if d.Attempt != 2 {
					t.Errorf("row %d delivered again with attempt %d, want 2", d.ID, d.Attempt)
				}
			}
			write(again)
			settleBatch(t, f, again, repeated(outcome.Ack(), 3)...)
			if n := noted(); n != 3 {
				t.Fatalf("an all-Ack batch committed %d of the handler's 3 writes", n)
			}
			if n := c.rows(t, ""); n != 0 {
				t.Fatalf("an all-Ack batch left %d rows, want none", n)
			}
		})
	}
}

// TestRowlockBatchHolds: a batch in work holds its rows: another consumer's claim passes over
// them without waiting and finds only the rest, until the batch settles or is released.
// ReleaseBatch makes them claimable at once with their attempt unchanged; SettleBatch with
// Retry makes them claimable with one attempt more.
func TestRowlockBatchHolds(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			c := rowlockBatchSetup(t, b, 0)
			c.publish(t, messages("q", 6)...)
			f1 := c.batchForm(t, inbox.Queue{Name: "q"})
			f2 := c.batchForm(t, inbox.Queue{Name: "q"})

			held := claimBatch(t, f1, 4)
			if len(held) != 4 {
				t.Fatalf("the first batch holds %d rows, want 4", len(held))
			}
			rest := claimBatch(t, f2, 10)
			if len(rest) != 2 || slices.ContainsFunc(rest, func(d *inbox.Delivery) bool { return slices.Contains(sortedIDs(held), d.ID) }) {
				t.Fatalf("the second consumer claimed rows %v while rows %v were held; want the 2 others", sortedIDs(rest), sortedIDs(held))
			}
			if ds := claimBatch(t, f2, 10); len(ds) != 0 {
				t.Fatalf("with every row held a claim got rows %v, want none", sortedIDs(ds))
			}

			releaseBatch(t, f1, held)
			back := claimBatch(t, f2, 10)
			if !slices.Equal(sortedIDs(back), sortedIDs(held)) {
				t.Fatalf("after ReleaseBatch the claim got rows %v, want the released %v", sortedIDs(back), sortedIDs(held))
			}
			for _, d := range back {
				if d.Attempt != 1 {
					t.Errorf("row %d after ReleaseBatch reads attempt %d, want 1 (a release costs no attempt)", d.ID, d.Attempt)
				}
			}
			if ds := claimBatch(t, f1, 10); len(ds) != 0 {
				t.Fatalf("with every row held a claim got rows %v, want none", sortedIDs(ds))
			}

			settleBatch(t, f2, back, repeated(outcome.Retry(), 4)...)
			retried := claimBatch(t, f1, 10)
			if !slices.Equal(sortedIDs(retried), sortedIDs(held)) {
				t.Fatalf("after the batch settled the claim got rows %v, want the retried %v", sortedIDs(retried), sortedIDs(held))
			}
			for _, d := range retried {
				if d.Attempt != 2 {
					t.Errorf("row %d after its Retry reads attempt %d, want 2", d.ID, d.Attempt)
				}
			}
			settleBatch(t, f1, retried, repeated(outcome.Ack(), 4)...)
			settleBatch(t, f2, rest, outcome.Ack(), outcome.Ack())
			if n := c.rows(t, ""); n != 0 {
				t.Fatalf("%d rows left after every batch acked, want none", n)
			}
		})
	}
}
