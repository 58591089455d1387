package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// deletingTable is the full table less processed_at, so that Ack and Drop delete their rows.
func deletingTable(name string) inbox.Table {
	tbl := fullTable(name)
	tbl.ProcessedAt = ""
	return tbl
}

func (c rowlockCell) batchForm(t *testing.T, q inbox.Binding) inbox.BatchForm {
	t.Helper()
	return batchForm(t, c.form(t, q))
}

// TestRowlockBatchDrain: three batch consumers of 3 workers each, on pools of their own, drain
// 3,000 rows in batches of 16: every row is handled exactly once and the table ends empty.
func TestRowlockBatchDrain(t *testing.T) {
	const size = 16
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, deletingTable)
		plan := rowlockDrainPlan{rows: 3000, consumers: 3, workers: 3, batch: size, within: 2 * time.Minute, exactlyOnce: true}
		if largest := rowlockDrain(t, c, b.dialect.(rowlock.Dialect), plan); largest != size {
			t.Errorf("the largest batch held %d rows, want %d: the claims did not batch", largest, size)
		}
	})
}

// TestRowlockBatchOutcomes: the outcomes of one batch land row by row: Ack and Drop delete,
// Retry counts an attempt and leaves the row claimable at once, RetryAfter counts one and hides
// the row until then.
func TestRowlockBatchOutcomes(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, deletingTable)
		f := c.batchForm(t, inbox.Binding{Name: "q"})
		for i := range 5 {
			c.publish(t, inbox.Message{Queue: "q", Payload: fmt.Appendf(nil, "%d", i)})
		}
		ds := claimBatchN(t, f, 10, 5)
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
		checkClaimed(t, again, []int64{ds[2].ID, ds[4].ID}, 2, "after the retries (not the one retried after an hour)")
		settleBatch(t, f, again, outcome.Ack(), outcome.Ack())
	})
}

// TestRowlockBatchTransactional: the handler writes through each delivery's Tx (the batch's one
// transaction). When every row acks, the writes commit with the settlements; when one row
// retries, every write rolls back and the acked rows are retried too (attempt + 1).
func TestRowlockBatchTransactional(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, deletingTable)
		notes := c.scratchTable(t, c.db, c.tbl.Name+"_notes", "row_id BIGINT NOT NULL")
		f := c.batchForm(t, inbox.Binding{Name: "q", Transactional: true})
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
		ds := claimBatchN(t, f, 10, 3)
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
		checkClaimed(t, again, deliveryIDs(ds), 2, "after the retried batch")
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

// TestRowlockBatchHolds: a batch in work holds its rows: another consumer's claim passes over
// them without waiting and finds only the rest, until the batch settles or is released.
// ReleaseBatch makes them claimable at once with their attempt unchanged; SettleBatch with
// Retry makes them claimable with one attempt more.
func TestRowlockBatchHolds(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, deletingTable)
		c.publish(t, messages("q", 6)...)
		f1 := c.batchForm(t, inbox.Binding{Name: "q"})
		f2 := c.batchForm(t, inbox.Binding{Name: "q"})

		held := claimBatchN(t, f1, 4, 4)
		rest := claimBatch(t, f2, 10)
		if len(rest) != 2 || slices.ContainsFunc(rest, func(d *inbox.Delivery) bool { return slices.Contains(sortedIDs(held), d.ID) }) {
			t.Fatalf("the second consumer claimed rows %v while rows %v were held; want the 2 others", sortedIDs(rest), sortedIDs(held))
		}
		if ds := claimBatch(t, f2, 10); len(ds) != 0 {
			t.Fatalf("with every row held a claim got rows %v, want none", sortedIDs(ds))
		}

		releaseBatch(t, f1, held)
		back := claimBatch(t, f2, 10)
		checkClaimed(t, back, deliveryIDs(held), 1, "after ReleaseBatch (a release costs no attempt)")
		if ds := claimBatch(t, f1, 10); len(ds) != 0 {
			t.Fatalf("with every row held a claim got rows %v, want none", sortedIDs(ds))
		}

		settleBatch(t, f2, back, repeated(outcome.Retry(), 4)...)
		retried := claimBatch(t, f1, 10)
		checkClaimed(t, retried, deliveryIDs(held), 2, "after their Retry")
		settleBatch(t, f1, retried, repeated(outcome.Ack(), 4)...)
		settleBatch(t, f2, rest, outcome.Ack(), outcome.Ack())
		if n := c.rows(t, ""); n != 0 {
			t.Fatalf("%d rows left after every batch acked, want none", n)
		}
	})
}
