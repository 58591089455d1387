package integration

import (
	"context"
	"database/sql"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// poolBackends are the servers of the pool tests: Postgres and MariaDB.
func poolBackends(t *testing.T) []backend {
	return onlyBackends(t, "postgres", "mariadb")
}

// poolWaitLogged reports whether log has the consumer's line about waiting on the pool, naming
// MaxOpenConns and its value.
func poolWaitLogged(log string, maxOpen int) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "SetMaxOpenConns") && strings.Contains(line, "max_open_conns="+strconv.Itoa(maxOpen)) {
			return true
		}
	}
	return false
}

// takeConns waits until after is closed (not at all, where it is nil), then takes n connections
// of db's, as a handler that holds them at once would, waiting for each as long as ctx lets it;
// giveBack returns them to the pool. On an error it has given back those it took.
func takeConns(ctx context.Context, db *sql.DB, after <-chan struct{}, n int) (giveBack func(), err error) {
	if after != nil {
		select {
		case <-after:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var conns []*sql.Conn
	giveBack = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			giveBack()
			return nil, err
		}
		conns = append(conns, c)
	}
	return giveBack, nil
}

// TestPoolWaitLoggedHoldingForms: in the row lock and advisory forms each delivery in work holds
// a pooled connection, so with the pool at the consumer's budget (workers + 1) handlers that
// each take two connections from db wait for one for good. The consumer says so in the log,
// naming MaxOpenConns, and Run still returns at its shutdown timeout.
func TestPoolWaitLoggedHoldingForms(t *testing.T) {
	for _, form := range []string{"rowlock", "advisory"} {
		for _, b := range poolBackends(t) {
			t.Run(form+"/"+b.name, func(t *testing.T) {
				const workers = 2
				db, tbl := b.openTable(t, workers+1, fullTable)
				b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("a")}, inbox.Message{Payload: []byte("b")})

				var mu sync.Mutex
				started := 0
				allIn := make(chan struct{}) // closed once both deliveries are in work, each holding its connection
				h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
					mu.Lock()
					if started++; started == workers {
						close(allIn)
					}
					mu.Unlock()
					giveBack, err := takeConns(ctx, db, allIn, 2)
					if err != nil {
						return outcome.Retry()
					}
					giveBack()
					return outcome.Ack()
				})
				var log inboxtest.Log
				c := cell{b: b, form: form}
				stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Workers: workers, ShutdownTimeout: time.Second, Logger: log.Logger(slog.LevelInfo)})
				if !eventually(30*time.Second, func() bool { return poolWaitLogged(log.String(), workers+1) }) {
					t.Fatalf("30 s with handlers waiting on a pool of %d and no line naming MaxOpenConns in the log:\n%s", workers+1, log.String())
				}
				stop()
				t.Log(log.String())
			})
		}
	}
}

// TestPoolLeaseKeepsItsLease: with the pool at the budget of a lease consumer of two workers
// (three connections), one handler holds two connections from db for eight leases while the
// other holds one and waits for another. The consumer's own statements do not wait behind them:
// the leases are extended all along (no row's lease runs out, no extension fails), both rows are
// acked, each delivered once, and the consumer logs the handlers' wait naming MaxOpenConns.
func TestPoolLeaseKeepsItsLease(t *testing.T) {
	forEachBackend(t, poolBackends(t), func(t *testing.T, b backend) {
		const workers = 2
		db := b.open(t, workers+1)
		watch := b.open(t, 2) // another process's view of the table
		tbl := b.newTable(t, db, fullTable)
		b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("a")}, inbox.Message{Payload: []byte("b")})
		name := b.q(t, tbl.Name)

		var (
			mu        sync.Mutex
			started   int
			delivered = map[int64]int{}
		)
		holding := make(chan struct{}) // closed once the first handler holds two connections
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			mu.Lock()
			started++
			first := started == 1
			delivered[d.ID]++
			mu.Unlock()
			after := holding // the first handler takes its connections at once, the other after it
			if first {
				after = nil
			}
			giveBack, err := takeConns(ctx, db, after, 2)
			if err != nil {
				return outcome.Retry()
			}
			defer giveBack()
			if first {
				close(holding)
				time.Sleep(8 * time.Second)
			}
			return outcome.Ack()
		})
		var log inboxtest.Log
		stop := runConsumer(t, db, lease.New(b.dialect, tbl, &lease.Config{Lease: time.Second}), h,
			&inbox.Config{Workers: workers, Logger: log.Logger(slog.LevelInfo)})

		<-holding
		expired := "SELECT COUNT(*) FROM " + name + " WHERE processed_at IS NULL AND (locked_until IS NULL OR locked_until < " + b.dialect.Placeholder(1) + ")"
		for i := range 12 { // six seconds of the eight the first handler holds its connections
			time.Sleep(500 * time.Millisecond)
			if n := count(t, watch, expired, b.dialect.Time(time.Now())); n != 0 {
				t.Fatalf("%d rows in work with their lease run out, %v into the handlers' wait:\n%s", n, time.Duration(i+1)*500*time.Millisecond, log.String())
			}
		}
		if !eventually(60*time.Second, func() bool {
			return count(t, watch, "SELECT COUNT(*) FROM "+name+" WHERE processed_at IS NULL") == 0
		}) {
			mu.Lock()
			t.Fatalf("60 s and the rows are not both acked (deliveries %v, pool %+v):\n%s", delivered, db.Stats(), log.String())
		}
		stop()
		mu.Lock()
		defer mu.Unlock()
		for id, n := range delivered {
			if n != 1 {
				t.Errorf("row %d delivered %d times, want once", id, n)
			}
		}
		out := log.String()
		for _, bad := range []string{"extending a hold failed", "lease lost"} {
			if strings.Contains(out, bad) {
				t.Errorf("the log says %q:\n%s", bad, out)
			}
		}
		if !poolWaitLogged(out, workers+1) {
			t.Errorf("no line naming MaxOpenConns in the log of a consumer whose handler waited 8 s on the pool:\n%s", out)
		}
	})
}

// TestPoolLeaseOwnConnectionReplaced: the lease form's own connection, killed from the server's
// side and left idle for a second, is found dead before a statement is sent on it and replaced
// from the pool, as a pooled connection handed out again would be: with the pool's other
// connections taken, so that the form's statements run on its own, an extension and the ack
// after it succeed.
func TestPoolLeaseOwnConnectionReplaced(t *testing.T) {
	forEachBackend(t, poolBackends(t), func(t *testing.T, b backend) {
		ctx := context.Background()
		c := cell{b: b, form: "lease"}
		admin := b.open(t, 2)
		db, hooks, err := hookedDB(b, b.dsn, func(hookEvent) {})
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(3)
		t.Cleanup(func() { db.Close() })
		tbl := b.newTable(t, admin, withAttempt)
		b.enqueue(t, admin, tbl, inbox.Message{Payload: []byte("p")})
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{})
		d := claimN(t, f, 1, 1)[0]

		sessions := hooks.sessions()
		if len(sessions) < 2 {
			t.Fatalf("the pool has %d connections open after Open and a claim, want the form's own and another", len(sessions))
		}
		for _, id := range sessions {
			if err := c.killSession(ctx, admin, id); err != nil {
				t.Fatal(err)
			}
		}
		// pgx checks a connection handed out again once it has been idle for a second; the
		// MySQL driver at every hand-out.
		time.Sleep(1100 * time.Millisecond)
		for range 2 {
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a statement waiting on the pool would wait for good
		defer cancel()
		if err := f.Extend(ctx, d); err != nil {
			t.Fatalf("the extension after the own connection was killed: %v", err)
		}
		if err := f.Settle(ctx, d, outcome.Ack()); err != nil {
			t.Fatalf("the ack after the own connection was killed: %v", err)
		}
		if n := b.countRows(t, admin, tbl, ""); n != 0 {
			t.Fatalf("%d rows left after the ack, want none", n)
		}
	})
}
