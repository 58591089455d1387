package integration

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// leaseForm opens a lease form over tbl on db, closed when the test ends.
func leaseForm(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, cfg *lease.Config, q inbox.Binding) *lease.Form[dialect.Dialect] {
	t.Helper()
	return openForm(t, lease.New(b.dialect, tbl, cfg), db, q)
}

// withAttempt is the minimal table with an attempt column: ack deletes, no retry_after.
func withAttempt(name string) inbox.Table {
	tbl := minimalTable(name)
	tbl.Attempt = "attempt"
	return tbl
}

// leaseContended publishes rows rows to a fresh table with an attempt column and opens two lease
// forms of a one-second lease over it, as two consumers contending for them: mine for queue q,
// theirs for the default queue.
func leaseContended(t *testing.T, b backend, rows int, q inbox.Binding) (db *sql.DB, tbl inbox.Table, mine, theirs *lease.Form[dialect.Dialect]) {
	t.Helper()
	db, tbl = b.openTable(t, 0, withAttempt)
	b.enqueue(t, db, tbl, messages("", rows)...)
	cfg := &lease.Config{Lease: time.Second}
	return db, tbl, leaseForm(t, b, db, tbl, cfg, q), leaseForm(t, b, db, tbl, cfg, inbox.Binding{})
}

// batchTaken claims a batch of n rows with mine, lets the batch's one-second lease run out and
// has theirs take k of its rows.
func batchTaken(t *testing.T, mine, theirs inbox.BatchForm, n, k int) (batch, taken []*inbox.Delivery) {
	t.Helper()
	batch = claimBatchN(t, mine, 16, n)
	time.Sleep(1200 * time.Millisecond)
	return batch, claimN(t, theirs, k, k)
}

func TestLeaseOutcomesProcessedAt(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		for range 5 {
			b.enqueue(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("p")})
		}
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{Name: "q"})
		ds := claimN(t, f, 10, 5)
		ack, drop, retry, later, released := ds[0], ds[1], ds[2], ds[3], ds[4]
		settle(t, f, ack, outcome.Ack())
		settle(t, f, drop, outcome.Drop())
		settle(t, f, retry, outcome.Retry())
		settle(t, f, later, outcome.RetryAfter(time.Hour))
		release(t, f, released)

		name, ph := b.q(t, tbl.Name), b.dialect.Placeholder(1)
		if n := count(t, db, "SELECT COUNT(*) FROM "+name); n != 5 {
			t.Errorf("%d rows left, want all 5 (ack and drop stamp processed_at)", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE processed_at IS NOT NULL AND locked_until IS NULL"); n != 2 {
			t.Errorf("%d rows stamped processed_at with the lease cleared, want 2 (ack, drop)", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE retry_after > "+ph, b.dialect.Time(time.Now().Add(50*time.Minute))); n != 1 {
			t.Errorf("%d rows with retry_after an hour ahead, want 1", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE locked_until IS NOT NULL"); n != 0 {
			t.Errorf("%d rows still leased after every outcome, want 0", n)
		}
		again := claimN(t, f, 10, 2)
		if got, want := deliveryIDs(again), []int64{retry.ID, released.ID}; !slices.Equal(got, want) {
			t.Errorf("claimed %v again, want the retried and released rows %v", got, want)
		}
		for _, d := range again {
			if d.Attempt != 2 {
				t.Errorf("row %d: attempt %d on its second delivery, want 2", d.ID, d.Attempt)
			}
		}
	})
}

func TestLeaseOutcomesDelete(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, withAttempt)
		for range 4 {
			b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("p")})
		}
		var log inboxtest.Log
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{Logger: log.Logger(slog.LevelInfo)})
		ds := claimN(t, f, 10, 4)
		settle(t, f, ds[0], outcome.Ack())
		settle(t, f, ds[1], outcome.Drop())
		settle(t, f, ds[2], outcome.Retry())
		settle(t, f, ds[3], outcome.RetryAfter(time.Hour))

		name := b.q(t, tbl.Name)
		if n := count(t, db, "SELECT COUNT(*) FROM "+name); n != 2 {
			t.Errorf("%d rows left, want 2 (ack and drop delete)", n)
		}
		if !log.Contains("retry_after") || !log.Contains(tbl.Name) {
			t.Errorf("RetryAfter without a retry_after column logged %q; want a warning naming the table", log.String())
		}
		again := claimN(t, f, 10, 2)
		if got, want := deliveryIDs(again), []int64{ds[2].ID, ds[3].ID}; !slices.Equal(got, want) {
			t.Errorf("claimed %v again, want %v (RetryAfter without the column retries at once)", got, want)
		}
	})
}

func TestLeaseAttempts(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, withAttempt)
		b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("p")})
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{})
		for want, give := range []func(*inbox.Delivery){
			func(d *inbox.Delivery) { settle(t, f, d, outcome.Retry()) },
			func(d *inbox.Delivery) {
				release(t, f, d)
			},
			func(d *inbox.Delivery) { settle(t, f, d, outcome.RetryAfter(0)) },
			func(d *inbox.Delivery) { settle(t, f, d, outcome.Ack()) },
		} {
			d := claimN(t, f, 1, 1)[0]
			if d.Attempt != want+1 {
				t.Fatalf("delivery %d reads attempt %d, want %d", want+1, d.Attempt, want+1)
			}
			if n := count(t, db, "SELECT attempt FROM "+b.q(t, tbl.Name)); n != want+1 {
				t.Fatalf("the row's attempt column holds %d on delivery %d", n, want+1)
			}
			give(d)
		}

		// Without an attempt column every delivery reads 0.
		plain := minimalTable(tableName(t) + "p")
		b.createTable(t, db, plain)
		b.enqueue(t, db, plain, inbox.Message{Payload: []byte("p")})
		g := leaseForm(t, b, db, plain, nil, inbox.Binding{})
		if d := claimN(t, g, 1, 1)[0]; d.Attempt != 0 {
			t.Errorf("attempt %d on a table without an attempt column, want 0", d.Attempt)
		}
	})
}

func TestLeaseOrder(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		for _, m := range []inbox.Message{
			{Queue: "b", Priority: 0},                   // 1: another queue
			{Queue: "a", Priority: 5},                   // 2
			{Queue: "a", Priority: 1},                   // 3
			{Queue: "a", Priority: 1},                   // 4
			{Queue: "a", Priority: 3},                   // 5
			{Queue: "a", Priority: 0, Delay: time.Hour}, // 6: not due
		} {
			m.Payload = []byte(m.Queue)
			b.enqueue(t, db, tbl, m)
		}
		a := leaseForm(t, b, db, tbl, nil, inbox.Binding{Name: "a"})
		ds := claimN(t, a, 10, 4)
		if got, want := deliveryIDs(ds), []int64{3, 4, 5, 2}; !slices.Equal(got, want) {
			t.Errorf("queue a claimed %v, want %v (priority, then id; the delayed row and queue b's left)", got, want)
		}
		for _, d := range ds {
			if d.Queue != "a" {
				t.Errorf("row %d of group %q claimed by queue a", d.ID, d.Queue)
			}
		}
		other := leaseForm(t, b, db, tbl, nil, inbox.Binding{Name: "b"})
		if got := deliveryIDs(claimN(t, other, 10, 1)); got[0] != 1 {
			t.Errorf("queue b claimed %v, want [1]", got)
		}
	})
}

func TestLeaseExpiredLeaseIsTaken(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl, first, second := leaseContended(t, b, 1, inbox.Binding{})

		mine := claimN(t, first, 1, 1)[0]
		claimN(t, second, 1, 0)
		time.Sleep(1200 * time.Millisecond)
		theirs := claimN(t, second, 1, 1)[0]
		if theirs.ID != mine.ID || theirs.Attempt != 2 {
			t.Fatalf("second consumer claimed row %d attempt %d, want row %d attempt 2", theirs.ID, theirs.Attempt, mine.ID)
		}

		if err := first.Extend(ctx, mine); !errors.Is(err, inbox.ErrLeaseLost) {
			t.Errorf("Extend of a taken lease: %v, want ErrLeaseLost", err)
		}
		err := first.Settle(ctx, mine, outcome.Ack())
		if !errors.Is(err, inbox.ErrLeaseLost) || !strings.Contains(err.Error(), tbl.Name) {
			t.Fatalf("Settle of a taken lease: %v, want ErrLeaseLost naming table %s", err, tbl.Name)
		}
		if n := b.countRows(t, db, tbl, ""); n != 1 {
			t.Fatalf("the lost ack changed the table: %d rows, want 1", n)
		}
		settle(t, second, theirs, outcome.Ack())
		if n := b.countRows(t, db, tbl, ""); n != 0 {
			t.Errorf("the holder's ack left %d rows", n)
		}
	})
}

func TestLeaseExtendKeepsRow(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl, holder, other := leaseContended(t, b, 1, inbox.Binding{})

		d := claimN(t, holder, 1, 1)[0]
		for start := time.Now(); time.Since(start) < 3*time.Second; {
			time.Sleep(300 * time.Millisecond)
			if err := holder.Extend(context.Background(), d); err != nil {
				t.Fatalf("Extend after %v: %v", time.Since(start), err)
			}
			claimN(t, other, 1, 0)
		}
		settle(t, holder, d, outcome.Ack())
		if n := b.countRows(t, db, tbl, ""); n != 0 {
			t.Errorf("%d rows after the ack of an extended lease, want 0", n)
		}
	})
}

func TestLeaseTransactional(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl := b.openTable(t, 0, withAttempt)
		side := b.scratchTable(t, db, tbl.Name+"_side", "n INT")
		name := b.q(t, tbl.Name)
		write := func(d *inbox.Delivery, n string) {
			t.Helper()
			if d.Tx == nil {
				t.Fatal("no Delivery.Tx in transactional mode")
			}
			if _, err := d.Tx.ExecContext(ctx, "INSERT INTO "+side+" (n) VALUES ("+n+")"); err != nil {
				t.Fatal(err)
			}
		}
		cfg := &lease.Config{Lease: time.Second}
		f := leaseForm(t, b, db, tbl, cfg, inbox.Binding{Transactional: true})

		// Ack commits the handler's write with the settlement. The transaction outlives the
		// claim's context, as a consumer's claim context ends when the claim returns.
		b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("ack")})
		claimCtx, endClaim := context.WithCancel(ctx)
		ds, err := f.Claim(claimCtx, 1)
		endClaim()
		if err != nil || len(ds) != 1 {
			t.Fatalf("Claim: %v, %v", ds, err)
		}
		d := ds[0]
		write(d, "1")
		settle(t, f, d, outcome.Ack())
		if n := count(t, db, "SELECT COUNT(*) FROM "+side+" WHERE n = 1"); n != 1 {
			t.Errorf("the acked handler's write: %d rows, want 1", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+name); n != 0 {
			t.Errorf("the acked row is still there")
		}

		// Retry rolls the handler's write back and still settles the row.
		b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("retry")})
		d = claimN(t, f, 1, 1)[0]
		write(d, "2")
		settle(t, f, d, outcome.Retry())
		if n := count(t, db, "SELECT COUNT(*) FROM "+side+" WHERE n = 2"); n != 0 {
			t.Errorf("the retried handler's write landed")
		}
		d = claimN(t, f, 1, 1)[0]
		if d.Attempt != 2 {
			t.Errorf("retried row redelivered with attempt %d, want 2", d.Attempt)
		}
		settle(t, f, d, outcome.Drop())

		// An ack whose lease was taken rolls the handler's write back and changes nothing.
		b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("lost")})
		d = claimN(t, f, 1, 1)[0]
		time.Sleep(1200 * time.Millisecond)
		other := leaseForm(t, b, db, tbl, cfg, inbox.Binding{})
		theirs := claimN(t, other, 1, 1)[0]
		write(d, "3")
		if err := f.Settle(ctx, d, outcome.Ack()); !errors.Is(err, inbox.ErrLeaseLost) {
			t.Fatalf("transactional ack of a taken lease: %v, want ErrLeaseLost", err)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+side+" WHERE n = 3"); n != 0 {
			t.Errorf("the write of a handler whose lease was lost landed")
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+name); n != 1 {
			t.Errorf("the lost ack changed the table: %d rows, want 1", n)
		}
		settle(t, other, theirs, outcome.Ack())
	})
}

// TestLeaseTransactionalSQLiteOneAtATime: in immediate mode a second delivery's transaction
// would wait for the first's write lock, held until its handler runs, so a claim takes one.
func TestLeaseTransactionalSQLiteOneAtATime(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "sqlite"), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, withAttempt)
		b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("1")}, inbox.Message{Payload: []byte("2")})
		b.dialect = dialect.SQLite[isolation.Immediate]{}
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{Transactional: true})
		for _, want := range []int64{1, 2} {
			d := claimN(t, f, 5, 1)[0]
			if d.ID != want {
				t.Fatalf("claimed row %d, want %d", d.ID, want)
			}
			settle(t, f, d, outcome.Ack())
		}
	})
}

func TestLeaseTransactionalStrictPostgres(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "postgres"), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, minimalTable)
		for _, d := range []dialect.Dialect{dialect.Postgres[isolation.RepeatableRead]{}, dialect.Postgres[isolation.Serializable]{}} {
			_, err := lease.New(d, tbl, nil).Open(context.Background(), db, inbox.Binding{Transactional: true})
			if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), tbl.Name) || !strings.Contains(err.Error(), string(d.Level())) {
				t.Errorf("transactional lease at %s: %v, want ErrDialect naming the table and the level", d.Level(), err)
			}
			f := lease.New(d, tbl, nil)
			if _, err := f.Open(context.Background(), db, inbox.Binding{}); err != nil {
				t.Errorf("lease at %s without transactional mode: %v", d.Level(), err)
			}
			f.Close()
		}
	})
}

func TestLeaseSchema(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl := b.openTable(t, 0, minimalTable)

		missing := withAttempt(tbl.Name) // the table has no attempt column
		_, err := lease.New(b.dialect, missing, nil).Open(ctx, db, inbox.Binding{})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), tbl.Name) || !strings.Contains(err.Error(), "claim") {
			t.Errorf("Open with a missing column: %v, want ErrSchema naming the table and the statement", err)
		}
		elsewhere := tbl
		elsewhere.LockedUntil = "leased_until"
		_, err = lease.New(b.dialect, elsewhere, nil).Open(ctx, db, inbox.Binding{})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), tbl.Name) {
			t.Errorf("Open with a missing lease column: %v, want ErrSchema naming the table", err)
		}
		_, err = lease.New(b.dialect, tbl, &lease.Config{Lease: 1500 * time.Millisecond}).Open(ctx, db, inbox.Binding{})
		if err == nil || !strings.Contains(err.Error(), tbl.Name) || !strings.Contains(err.Error(), "lease.Config.Lease") {
			t.Errorf("Open with a 1.5 s lease: %v, want an error naming the table and lease.Config.Lease", err)
		}

		if b.name == "mysql" || b.name == "mariadb" {
			b.scratchTable(t, db, tbl.Name+"_s", "id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, locked_until DATETIME NULL")
			_, err := lease.New(b.dialect, minimalTable(tbl.Name+"_s"), nil).Open(ctx, db, inbox.Binding{})
			if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "DATETIME(6)") || !strings.Contains(err.Error(), tbl.Name+"_s") {
				t.Errorf("Open with a DATETIME lease column: %v, want ErrSchema asking for DATETIME(6)", err)
			}
		}
	})
}

func TestLeaseClose(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl := b.openTable(t, 0, withAttempt)
		b.enqueue(t, db, tbl, inbox.Message{Payload: []byte("1")}, inbox.Message{Payload: []byte("2")})
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{Transactional: true})
		ds := append(claimN(t, f, 1, 1), claimN(t, f, 1, 1)...) // each with its transaction open
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		other := leaseForm(t, b, db, tbl, nil, inbox.Binding{})
		claimN(t, other, 2, 2) // Close gave both rows back

		if _, err := f.Claim(ctx, 1); !errors.Is(err, inbox.ErrClosed) {
			t.Errorf("Claim after Close: %v, want ErrClosed", err)
		}
		if err := f.Extend(ctx, ds[0]); !errors.Is(err, inbox.ErrClosed) {
			t.Errorf("Extend after Close: %v, want ErrClosed", err)
		}
		if err := f.Settle(ctx, ds[0], outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
			t.Errorf("Settle after Close: %v, want ErrClosed", err)
		}
	})
}

func TestLeaseConsumerLongHandler(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 16)
		db1, db2 := dbs[0], dbs[1]
		tbl := b.newTable(t, db1, withAttempt)
		b.enqueue(t, db1, tbl, inbox.Message{Payload: []byte("slow")})

		var calls atomic.Int32
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			calls.Add(1)
			time.Sleep(3 * time.Second)
			return outcome.Ack()
		})
		cfg := &inbox.Config{Retry: inbox.RetryAtOnce, Workers: 2, PollInterval: 50 * time.Millisecond, Logger: testLogger(t)}
		lc := &lease.Config{Lease: time.Second}
		drainTable(t, b, db1, tbl, 20*time.Second, "the slow handler's ack",
			inbox.NewConsumer(db1, lease.New(b.dialect, tbl, lc), h, cfg),
			inbox.NewConsumer(db2, lease.New(b.dialect, tbl, lc), h, cfg))
		if n := calls.Load(); n != 1 {
			t.Errorf("a handler running 3x its lease was called %d times, want once", n)
		}
	})
}

func TestLeaseConsumersDrain(t *testing.T) {
	const rows = 2000
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 2, 16)
		tbl := b.newTable(t, dbs[0], withAttempt)
		b.enqueue(t, dbs[0], tbl, messages("", rows)...)

		var calls rowCounts
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			calls.add(d)
			return outcome.Ack()
		})
		cfg := &inbox.Config{Retry: inbox.RetryAtOnce, Workers: 4, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)}
		drainTable(t, b, dbs[0], tbl, 3*time.Minute, "the table to drain",
			inbox.NewConsumer(dbs[0], lease.New(b.dialect, tbl, nil), h, cfg),
			inbox.NewConsumer(dbs[1], lease.New(b.dialect, tbl, nil), h, cfg))
		calls.checkOnce(t, "handled", rows)
	})
}

// TestLeaseSQLiteClaimsFromTwoPools claims from one SQLite file through two pools, as two
// processes would (each pool has a writer lock of its own), four claimers each, while the
// other pool commits: a claim reads its rows and then writes them, and must neither fail nor
// take a row twice.
func TestLeaseSQLiteClaimsFromTwoPools(t *testing.T) {
	b := backendNamed("sqlite", "")
	dbs := b.openDBs(t, 2, 16)
	tbl := b.newTable(t, dbs[0], withAttempt)
	const rows = 400
	b.enqueue(t, dbs[0], tbl, messages("", rows)...)

	var (
		claimed rowCounts
		wg      sync.WaitGroup
	)
	for _, db := range dbs {
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ds, err := f.Claim(context.Background(), 1)
					if err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					if len(ds) == 0 {
						return
					}
					claimed.add(ds[0])
					if err := f.Settle(context.Background(), ds[0], outcome.Ack()); err != nil {
						t.Errorf("Settle row %d: %v", ds[0].ID, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	claimed.checkOnce(t, "claimed", rows)
}

// TestLeaseLostCancelsTheHandler: a handler that outlives its lease, once another consumer has
// taken the row over (the test expires the lease by SQL, as a stalled extension would, and a
// second consumer claims the row), sees its context cancelled with a cause wrapping
// inbox.ErrLeaseLost, while the new holder settles the row. In transactional mode too, except on
// SQLite, where the delivery's transaction holds the one write lock from its first extension,
// so no one else can take the row.
func TestLeaseLostCancelsTheHandler(t *testing.T) {
	for _, b := range backends(t, true) {
		for _, transactional := range []bool{false, true} {
			if transactional && b.name == "sqlite" {
				continue
			}
			name := b.name
			if transactional {
				name += "-transactional"
			}
			t.Run(name, func(t *testing.T) {
				dbs := b.openDBs(t, 2, 16)
				db1, db2 := dbs[0], dbs[1]
				tbl := b.newTable(t, db1, fullTable)
				b.enqueue(t, db1, tbl, inbox.Message{Queue: "q"})
				cfg := &lease.Config{Lease: time.Second}

				started := make(chan int64, 1)
				cause := make(chan error, 1)
				first := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
					started <- d.ID
					select {
					case <-ctx.Done():
						cause <- context.Cause(ctx)
					case <-time.After(20 * time.Second):
						cause <- nil
					}
					return outcome.Ack()
				})
				stopFirst := startConsumer(t, inbox.NewConsumer(db1, lease.New(b.dialect, tbl, cfg), first,
					&inbox.Config{Retry: inbox.RetryAtOnce, Queue: "q", Transactional: transactional, PollInterval: cellPoll, Logger: testLogger(t)}))
				id := <-started

				// The lease runs out (as when the first consumer's extensions stall), and a second
				// consumer takes the row.
				mustExec(t, db2, "UPDATE "+b.q(t, tbl.Name)+" SET locked_until = "+b.dialect.Placeholder(1)+" WHERE id = "+b.dialect.Placeholder(2),
					b.dialect.Time(time.Now().Add(-time.Hour)), id)
				var took atomic.Int32
				second := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
					took.Add(1)
					return outcome.Ack()
				})
				stopSecond := startConsumer(t, inbox.NewConsumer(db2, lease.New(b.dialect, tbl, cfg), second,
					&inbox.Config{Retry: inbox.RetryAtOnce, Queue: "q", PollInterval: cellPoll, Logger: testLogger(t)}))

				select {
				case err := <-cause:
					if !errors.Is(err, inbox.ErrLeaseLost) {
						t.Errorf("the first handler's context cause: %v, want one wrapping inbox.ErrLeaseLost", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the first handler did not return")
				}
				waitFor(t, 20*time.Second, "the second consumer to settle the row", func() bool {
					return count(t, db1, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE processed_at IS NULL") == 0
				})
				stopFirst()
				stopSecond()
				if n := took.Load(); n != 1 {
					t.Errorf("the second consumer handled the row %d times, want once", n)
				}
			})
		}
	}
}

// TestLeaseIdleClaimTakesNoWriteLock: on SQLite, once a claim came back empty, the next claim
// reads before it writes: while another connection holds the database's one write lock, it
// returns no row at once rather than wait for a lock it does not need (up to the busy timeout),
// and once a row is published it takes it.
func TestLeaseIdleClaimTakesNoWriteLock(t *testing.T) {
	for _, b := range onlyBackends(t, "sqlite") {
		ctx := context.Background()
		dbs := b.openDBs(t, 2, 4)
		tbl := b.newTable(t, dbs[0], withAttempt)
		f := leaseForm(t, b, dbs[0], tbl, nil, inbox.Binding{})
		claimN(t, f, 1, 0) // the queue is empty: the next claim reads first
		writer, err := dbs[1].Conn(ctx)
		must(t, "Conn", err)
		defer writer.Close()
		_, err = writer.ExecContext(ctx, "BEGIN IMMEDIATE")
		must(t, "BEGIN IMMEDIATE", err)
		waiting, cancel := context.WithTimeout(ctx, 3*time.Second)
		ds, err := f.Claim(waiting, 1)
		cancel()
		if err != nil || len(ds) != 0 {
			t.Errorf("an idle claim while another connection held the write lock: %d rows, %v; want none, at once", len(ds), err)
		}
		_, err = writer.ExecContext(ctx, "ROLLBACK")
		must(t, "ROLLBACK", err)
		b.enqueue(t, dbs[1], tbl, inbox.Message{Payload: []byte("1")})
		claimN(t, f, 1, 1)
	}
}
