package integration

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseBatchesOnAFullPool: transactional lease batches are extended and settled while
// their consumer's pool has no connection to spare, as the consumer plans it: of a pool of four,
// the form keeps one, each of the two workers' batches holds one for its transaction, and the
// application holds the last, here throughout. Each batch's handler runs past an extension.
// Neither the extension nor the ack inside the batch's transaction may wait for a connection of
// the pool to prepare its statement: the extension would fail, every half lease, until the
// lease ran out ("preparing the extend statement: context canceled"), and the ack would wait
// with the batch's transaction open until the settlement's limit (30 s) ran out, holding
// whatever its handler locked (TestClusterGalera's conflicting handlers stalled so, each batch's
// settlement waiting for a pool that the other handlers' transactions held, waiting for its
// locks). Every row settles, and the consumers log no failed extension or settlement.
func TestLeaseBatchesOnAFullPool(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		const (
			rows    = 32
			batch   = 8
			leaseOf = 4 * time.Second
		)
		db := b.open(t, 4)
		tbl := fullTable(tableName(t))
		b.createTable(t, db, tbl)
		b.enqueue(t, db, tbl, messages("q", rows)...)
		app := pin(t, db) // the application's connection, which it holds until the end

		logs := &faultLog{t: t}
		cons := consumerOf(t, db, lease.New(b.dialect, tbl, &lease.Config{Lease: leaseOf}), batch, func(ctx context.Context, ds ...*inbox.Delivery) []outcome.Outcome {
			// Past the first extension, half a lease after the claim.
			time.Sleep(leaseOf * 3 / 4)
			outs := make([]outcome.Outcome, len(ds))
			for i := range outs {
				outs[i] = outcome.Ack()
			}
			return outs
		}, &inbox.Config{Queue: "q", Workers: 2, Transactional: true, PollInterval: cellPoll, Logger: logs.Logger(slog.LevelWarn)})
		stop := startConsumer(t, cons)

		left := "SELECT COUNT(*) FROM " + b.q(t, tbl.Name) + " WHERE " + b.q(t, tbl.ProcessedAt) + " IS NULL"
		waitFor(t, 2*time.Minute, "every row to settle", func() bool {
			var n int
			if err := app.QueryRowContext(context.Background(), left).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
		stop()
		for _, failed := range []string{"extending a hold failed", "settlement failed"} {
			if text := logs.String(); strings.Contains(text, failed) {
				t.Errorf("the consumer logged %q: a batch in work waited for the pool:\n%s", failed, text)
			}
		}
	})
}
