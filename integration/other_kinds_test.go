package integration

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/lease"
)

type kindA struct{}

func (kindA) Kind() string { return "kind_a" }

// TestOtherKindsLoggedOnceNeverClaimed: a consumer of kind A on a table that also holds rows
// of kind B runs the rows of A, never claims those of B, and logs kind B once, at WARN, with its
// rows.
func TestOtherKindsLoggedOnceNeverClaimed(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl, _ := adminOpen(t, b)
		mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD COLUMN "+b.q(t, "kind")+" VARCHAR(64)")
		tbl.Kind = "kind"
		ctx := context.Background()
		if err := inbox.Enqueue(ctx, db, b.dialect, tbl, inbox.Job(kindA{}), inbox.Job(kindA{}),
			inbox.Message{Kind: "kind_b"}, inbox.Message{Kind: "kind_b"}, inbox.Message{Kind: "kind_b"}); err != nil {
			t.Fatal(err)
		}
		var kinds inbox.Kinds
		var ran atomic.Int32
		inbox.Handle(&kinds, func(_ context.Context, d *inbox.Delivery, _ kindA) error {
			if d.Kind != "kind_a" {
				t.Errorf("kind A's handler got a row of kind %q", d.Kind)
			}
			ran.Add(1)
			return nil
		})
		var log inboxtest.Log
		c := inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), &kinds, &inbox.Config{Logger: log.Logger(slog.LevelWarn), PollInterval: 20 * time.Millisecond})
		runCtx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(runCtx) }()
		waitFor(t, 20*time.Second, "kind A's rows run and kind B logged", func() bool {
			return ran.Load() == 2 && log.Contains("kind=kind_b")
		})
		time.Sleep(300 * time.Millisecond) // claims and polls go on: B is still neither claimed nor logged again
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		out := log.String()
		if n := strings.Count(out, "kind=kind_b"); n != 1 || !strings.Contains(out, "rows=3") || !strings.Contains(out, "level=WARN") {
			t.Errorf("kind B logged %d times, want once at WARN with rows=3:\n%s", n, out)
		}
		if strings.Contains(out, "kind=kind_a") {
			t.Errorf("the consumer logged the kind it runs:\n%s", out)
		}
		q := func(s string) string { return b.q(t, s) }
		if n := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)+" WHERE "+q("kind")+" = 'kind_b' AND "+q("attempt")+" = 0 AND "+q("processed_at")+" IS NULL"); n != 3 {
			t.Errorf("%d rows of kind B untouched (attempt 0, not processed), want all 3", n)
		}
	})
}
