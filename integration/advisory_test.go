package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/outcome"
)

// advisoryForm builds the advisory form for the backend's dialect (a typed dialect, whatever
// the backend).
func advisoryForm(t *testing.T, b backend, tbl inbox.Table, key string) inbox.Form {
	t.Helper()
	d, ok := b.dialect.(advisory.Dialect)
	if !ok {
		t.Fatalf("dialect %s takes no advisory form", b.dialect.Name())
	}
	return advisory.New(d, tbl, &advisory.Config{Key: key})
}

func TestAdvisoryOutcomes(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		b.enqueue(t, db, tbl, messages("q", 4)...)
		b.enqueue(t, db, tbl, messages("other", 1)...)

		f := openForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}"), db, inbox.Binding{Name: "q"})
		ds := claimN(t, f, 10, 4) // the queue's rows
		for i, d := range ds {
			if want := fmt.Sprintf("m%d", i+1); string(d.Payload) != want || d.Attempt != 1 || d.Queue != "q" {
				t.Fatalf("delivery %d: payload %q attempt %d group %q; want %q, 1, q (claim order)", i, d.Payload, d.Attempt, d.Queue, want)
			}
		}

		// Another consumer finds every key held.
		other := openForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}"), db, inbox.Binding{Name: "q"})
		if got := claim(t, other, 10); len(got) != 0 {
			t.Fatalf("a second consumer claimed %v while every row was held", deliveryIDs(got))
		}

		ack, drop, retry, later := ds[0], ds[1], ds[2], ds[3]
		settle(t, f, ack, outcome.Ack())
		settle(t, f, drop, outcome.Drop())
		settle(t, f, retry, outcome.Retry())
		settle(t, f, later, outcome.RetryAfter(time.Hour))
		if stamped := count(t, db, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE "+b.q(t, "processed_at")+" IS NOT NULL AND "+b.q(t, "id")+" IN ("+b.placeholders(2)+")", ack.ID, drop.ID); stamped != 2 {
			t.Fatalf("ack and drop stamped %d rows, want 2", stamped)
		}
		if err := f.Settle(context.Background(), ack, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("settling a delivery twice: %v, want ErrClosed", err)
		}

		// The retried row comes back at once, its attempt counted by the take; the delayed row
		// does not.
		again := claimRow(t, other, 10, retry.ID, "alone after retry and retry-after")
		if again.Attempt != 2 {
			t.Fatalf("the retried row at attempt %d, want 2", again.Attempt)
		}
		release(t, other, again)
		if err := other.Extend(context.Background(), again); !errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("extending a released delivery: %v, want ErrClosed", err)
		}
		released := claimRow(t, f, 10, retry.ID, "after its release")
		if released.Attempt != 3 {
			t.Fatalf("the released row at attempt %d, want 3", released.Attempt)
		}

		// Close gives the held row back; its settlement then fails with ErrClosed.
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Settle(context.Background(), released, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("settling after Close: %v, want ErrClosed", err)
		}
		settle(t, other, claimRow(t, other, 10, retry.ID, "back after Close"), outcome.Ack())
		if _, err := f.Claim(context.Background(), 1); !errors.Is(err, inbox.ErrClosed) {
			t.Fatalf("claiming after Close: %v, want ErrClosed", err)
		}
	})
}

// TestAdvisoryMinimalTable covers a table with no attempt, processed_at or retry_after column:
// the take only re-reads, Ack deletes, and RetryAfter retries at once.
func TestAdvisoryMinimalTable(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, minimalTable)
		b.enqueue(t, db, tbl, messages("", 3)...)

		f := openForm(t, advisoryForm(t, b, tbl, tbl.Name+":{id}"), db, inbox.Binding{})
		ds := claim(t, f, 3)
		if len(ds) != 3 || ds[0].Attempt != 0 {
			t.Fatalf("claimed %v, want 3 rows with attempt 0 (no attempt column)", deliveryIDs(ds))
		}
		settle(t, f, ds[0], outcome.Ack())
		settle(t, f, ds[1], outcome.Drop())
		settle(t, f, ds[2], outcome.RetryAfter(time.Hour))
		if n := b.countRows(t, db, tbl, ""); n != 1 {
			t.Fatalf("%d rows left, want 1 (ack and drop delete)", n)
		}
		settle(t, f, claimRow(t, f, 3, ds[2].ID, "back at once (no retry_after column)"), outcome.Ack())
	})
}

func TestAdvisoryTransactional(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		q := func(ident string) string { return b.q(t, ident) }
		side := b.scratchTable(t, db, tbl.Name+"_side", "id BIGINT PRIMARY KEY")
		insert := "INSERT INTO " + side + " (id) VALUES (" + b.dialect.Placeholder(1) + ")"
		b.enqueue(t, db, tbl, messages("q", 4)...)

		f := openForm(t, advisoryForm(t, b, tbl, tbl.Name+"-{id}"), db, inbox.Binding{Name: "q", Transactional: true})
		ds := claimN(t, f, 4, 4)
		outcomes := []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Retry(), outcome.RetryAfter(time.Hour)}
		for i, d := range ds {
			if d.Tx == nil {
				t.Fatal("no transaction lent in transactional mode")
			}
			if _, err := d.Tx.ExecContext(context.Background(), insert, d.ID); err != nil {
				t.Fatal(err)
			}
			settle(t, f, d, outcomes[i])
			if _, err := d.Tx.ExecContext(context.Background(), insert, -d.ID); !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Fatalf("the transaction after settlement: %v, want ErrTransactionHeld", err)
			}
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+side); n != 1 {
			t.Fatalf("%d handler writes committed, want only the Ack's", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+side+" s JOIN "+q(tbl.Name)+" j ON j."+q("id")+" = s.id WHERE j."+q("processed_at")+" IS NOT NULL"); n != 1 {
			t.Fatalf("the Ack's write and its settlement: %d, want committed together", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)+" WHERE "+q("processed_at")+" IS NOT NULL"); n != 2 {
			t.Fatalf("%d rows settled, want ack and drop (drop settles after rolling back)", n)
		}
		settle(t, f, claimRow(t, f, 4, ds[2].ID, "(the retried row)"), outcome.Ack())
	})
}

func TestAdvisoryKeyTemplate(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		for _, key := range []string{"jobs-{id", "jobs-id}", "jobs-{}", "jobs-{{id}}", "it's-{id}", `a\b-{id}`, "jobs-{" + strings.Repeat("x", 70) + "}"} {
			_, err := advisoryForm(t, b, tbl, key).Open(context.Background(), db, inbox.Binding{Name: "q"})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
				t.Errorf("template %q: %v, want an error naming the template", key, err)
			}
		}

		f := advisoryForm(t, b, tbl, tbl.Name+"-{account}")
		_, err := f.Open(context.Background(), db, inbox.Binding{Name: "q"})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), tbl.Name+"-{account}") || !strings.Contains(err.Error(), "account") {
			t.Fatalf("a template over a column the table lacks: %v, want ErrSchema naming the template", err)
		}
		f.Close()
	})
}

// advisoryAccountTable creates a full table with an account column the key renders, and
// publishes rows rows to queue q, row id in account id % accounts.
func advisoryAccountTable(t *testing.T, b backend, db *sql.DB, rows, accounts int) inbox.Table {
	t.Helper()
	tbl := b.newTable(t, db, fullTable)
	name := b.q(t, tbl.Name)
	mustExec(t, db, "ALTER TABLE "+name+" ADD COLUMN account INT")
	b.enqueue(t, db, tbl, messages("q", rows)...)
	mustExec(t, db, "UPDATE "+name+" SET account = id % "+fmt.Sprint(accounts))
	return tbl
}

// accountsApart is a drain of advisoryAccountsApart: rows rows of accounts accounts, claimed by
// two consumers of workers workers each, in batches of up to batch rows (0: a row a delivery),
// within limit.
type accountsApart struct {
	accounts, rows, batch, workers int
	limit                          time.Duration
}

// advisoryAccountsApart drains p's rows with two consumers (each with its own pool) over a key
// on an account column, each delivery holding its rows in work for a millisecond: no two
// deliveries, of one consumer or of both, ever hold rows of one account at once (so a batch
// holds one row per account), and every row is handled exactly once. It returns how many
// deliveries held more than one row.
func advisoryAccountsApart(t *testing.T, b backend, p accountsApart) (shared int) {
	t.Helper()
	db := b.open(t, 0)
	tbl := advisoryAccountTable(t, b, db, p.rows, p.accounts)
	accountOf := func(d *inbox.Delivery) int64 { return d.ID % int64(p.accounts) }
	var (
		handled  rowCounts
		mu       sync.Mutex
		inWork   = map[int64]bool{} // account
		failures []string
	)
	handle := func(_ context.Context, ds ...*inbox.Delivery) []outcome.Outcome {
		mu.Lock()
		for _, d := range ds {
			a := accountOf(d)
			if inWork[a] {
				failures = append(failures, fmt.Sprintf("account %d: row %d delivered while another row of the account was in work", a, d.ID))
			}
			inWork[a] = true
		}
		if len(ds) > 1 {
			shared++
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		for _, d := range ds {
			inWork[accountOf(d)] = false
		}
		mu.Unlock()
		handled.add(ds...)
		return repeated(outcome.Ack(), len(ds))
	}
	advisoryDrain(t, b, db, tbl, &handled, p.rows, p.limit, func(pool *sql.DB) *inbox.Consumer {
		f := advisoryForm(t, b, tbl, tbl.Name+"-acct-{account}")
		return consumerOf(t, pool, f, p.batch, handle, &inbox.Config{Queue: "q", Workers: p.workers, PollInterval: 10 * time.Millisecond})
	})
	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Error(f)
	}
	return shared
}

// advisoryDrain runs two consumers that consumer builds, each on a pool of its own, until tbl
// has no row left unprocessed, failing the test after limit; then it checks that the handlers
// handled each of the rows rows exactly once.
func advisoryDrain(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, handled *rowCounts, rows int, limit time.Duration, consumer func(pool *sql.DB) *inbox.Consumer) {
	t.Helper()
	drainTable(t, b, db, tbl, limit, "every row handled", consumer(b.open(t, 8)), consumer(b.open(t, 8)))
	handled.checkOnce(t, "handled", rows)
}

// TestAdvisoryAccountsRunInTurn runs a key over an account column: each account's rows run one
// at a time, in claim order, while other accounts run alongside.
func TestAdvisoryAccountsRunInTurn(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 0)
		const accounts, perAccount = 4, 6
		tbl := advisoryAccountTable(t, b, db, accounts*perAccount, accounts)

		var (
			mu       sync.Mutex
			running  = map[int]int64{} // account → id in work
			last     = map[int]int64{} // account → last id handled
			inFlight int
			peak     int
			handled  int
			failures []string
		)
		accountOf := func(id int64) int { return int(id % accounts) }
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			a := accountOf(d.ID)
			mu.Lock()
			if other, busy := running[a]; busy {
				failures = append(failures, fmt.Sprintf("account %d: row %d started while row %d was in work", a, d.ID, other))
			}
			if d.ID < last[a] {
				failures = append(failures, fmt.Sprintf("account %d: row %d after row %d, out of claim order", a, d.ID, last[a]))
			}
			running[a] = d.ID
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()

			// Hold the first rows until another account's row runs alongside (or give up
			// after a while, and the peak check below fails).
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				p := peak
				mu.Unlock()
				if p >= 2 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(2 * time.Millisecond)

			mu.Lock()
			delete(running, a)
			last[a] = d.ID
			inFlight--
			handled++
			mu.Unlock()
			return outcome.Ack()
		})
		f := advisoryForm(t, b, tbl, tbl.Name+"-acct-{account}")
		stop := startConsumer(t, inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 20 * time.Millisecond}))
		waitFor(t, 20*time.Second, "every row handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return handled == accounts*perAccount
		})
		stop()
		mu.Lock()
		defer mu.Unlock()
		for _, f := range failures {
			t.Error(f)
		}
		if peak < 2 {
			t.Errorf("at most %d handler ran at once: other accounts did not run in parallel", peak)
		}
	})
}

// TestAdvisoryTwoConsumersNeverShareAKey runs two consumers (each with its own pool) over keys
// shared by several rows: no key is ever in work twice, and every row is handled exactly once.
func TestAdvisoryTwoConsumersNeverShareAKey(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		advisoryAccountsApart(t, b, accountsApart{accounts: 8, rows: 160, workers: 4, limit: 20 * time.Second})
	})
}

// TestAdvisoryPoolBudget holds every delivery unsettled: the consumer stops at the pool's size
// less one, and the application can still take a connection.
func TestAdvisoryPoolBudget(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		const pool = 4
		db, tbl := b.openTable(t, pool, fullTable)
		b.enqueue(t, db, tbl, messages("q", 10)...)

		var (
			mu   sync.Mutex
			held int
			peak int
		)
		release := make(chan struct{})
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			mu.Lock()
			held++
			peak = max(peak, held)
			mu.Unlock()
			<-release
			return outcome.Ack()
		})
		f := advisoryForm(t, b, tbl, tbl.Name+"-{id}")
		stop := startConsumer(t, inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: 10, PollInterval: 10 * time.Millisecond}))
		waitFor(t, 20*time.Second, fmt.Sprintf("%d deliveries in work", pool-1), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return held == pool-1
		})
		// Several poll intervals with every worker busy: no further claim may start.
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := db.Conn(ctx)
		cancel()
		if err != nil {
			t.Fatalf("the application could not take a connection with the consumer at its budget: %v", err)
		}
		conn.Close()
		mu.Lock()
		if peak != pool-1 {
			t.Errorf("%d deliveries held at once, want the pool's size less one (%d)", peak, pool-1)
		}
		mu.Unlock()
		close(release)
		stop()
	})
}
