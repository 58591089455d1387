package integration

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// TestRowlockBatchesOnAFullPool: transactional row lock batches settle while their consumer's
// pool has no connection to spare, as the consumer plans it: of a pool of four, each of the
// three workers' batches holds one for its transaction and the application holds the last,
// here throughout. Each batch retries one row after a delay and acks the others, so that it
// settles by a stamp and an ack. Nothing its settlement runs inside the batch's transaction may
// wait for a connection of the pool to prepare a statement: it would wait with the transaction
// open until the settlement's limit (30 s) ran out, then fail and give the batch back, and the
// batches of the other workers would wait the same way for the connections those hold. Every
// row settles, and the consumer logs no failed settlement.
func TestRowlockBatchesOnAFullPool(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		const rows, batch = 48, 8
		db := b.open(t, 4)
		tbl := fullTable(tableName(t))
		b.createTable(t, db, tbl)
		b.enqueue(t, db, tbl, messages("q", rows)...)
		app := pin(t, db) // the application's connection, which it holds until the end

		logs := &faultLog{t: t}
		cons := consumerOf(t, db, rowlock.New(b.dialect.(rowlock.Dialect), tbl), batch, func(ctx context.Context, ds ...*inbox.Delivery) []outcome.Outcome {
			// Long enough that every worker holds a batch while the first settles.
			time.Sleep(200 * time.Millisecond)
			outs := make([]outcome.Outcome, len(ds))
			for i := range outs {
				outs[i] = outcome.Ack()
			}
			outs[0] = outcome.RetryAfter(time.Hour)
			return outs
		}, &inbox.Config{Queue: "q", Workers: 3, Transactional: true, PollInterval: cellPoll, Logger: logs.Logger(slog.LevelWarn)})
		stop := startConsumer(t, cons)

		left := "SELECT COUNT(*) FROM " + b.q(t, tbl.Name) + " WHERE " + b.q(t, tbl.ProcessedAt) + " IS NULL AND " + b.q(t, tbl.RetryAfter) + " IS NULL"
		waitFor(t, 2*time.Minute, "every row to settle", func() bool {
			var n int
			if err := app.QueryRowContext(context.Background(), left).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
		stop()
		if text := logs.String(); strings.Contains(text, "settlement failed") {
			t.Errorf("the consumer logged a failed settlement: a batch in work waited for the pool:\n%s", text)
		}
	})
}
