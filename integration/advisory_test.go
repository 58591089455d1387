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

// advisoryOpen opens f on db for queue q, closing it when the test ends.
func advisoryOpen(t *testing.T, f inbox.Form, db *sql.DB, q inbox.Queue) {
	t.Helper()
	if _, err := f.Open(context.Background(), db, q); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

func advisoryClaim(t *testing.T, f inbox.Form, max int) []*inbox.Delivery {
	t.Helper()
	ds, err := f.Claim(context.Background(), max)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func advisoryIDs(ds []*inbox.Delivery) []int64 {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

func advisorySettle(t *testing.T, f inbox.Form, d *inbox.Delivery, o outcome.Outcome) {
	t.Helper()
	if err := f.Settle(context.Background(), d, o); err != nil {
		t.Fatalf("settling row %d (%s): %v", d.ID, o, err)
	}
}

// advisoryEnqueue publishes n rows to queue q with payloads "m1", "m2", …
func advisoryEnqueue(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, q string, n int) {
	t.Helper()
	msgs := make([]inbox.Message, n)
	for i := range msgs {
		msgs[i] = inbox.Message{Queue: q, Payload: fmt.Appendf(nil, "m%d", i+1)}
	}
	if err := inbox.Enqueue(context.Background(), db, b.dialect, tbl, msgs...); err != nil {
		t.Fatal(err)
	}
}

func TestAdvisoryOutcomes(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := fullTable(tableName(t))
			b.createTable(t, db, tbl)
			q := func(s string) string { s, _ = b.dialect.Quote(s); return s }
			advisoryEnqueue(t, b, db, tbl, "q", 4)
			advisoryEnqueue(t, b, db, tbl, "other", 1)

			f := advisoryForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, f, db, inbox.Queue{Name: "q"})
			ds := advisoryClaim(t, f, 10)
			if len(ds) != 4 {
				t.Fatalf("claimed %v, want the queue's 4 rows", advisoryIDs(ds))
			}
			for i, d := range ds {
				if want := fmt.Sprintf("m%d", i+1); string(d.Payload) != want || d.Attempt != 1 || d.Queue != "q" {
					t.Fatalf("delivery %d: payload %q attempt %d group %q; want %q, 1, q (claim order)", i, d.Payload, d.Attempt, d.Queue, want)
				}
			}

			// Another consumer finds every key held.
			other := advisoryForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, other, db, inbox.Queue{Name: "q"})
			if got := advisoryClaim(t, other, 10); len(got) != 0 {
				t.Fatalf("a second consumer claimed %v while every row was held", advisoryIDs(got))
			}

			ack, drop, retry, later := ds[0], ds[1], ds[2], ds[3]
			advisorySettle(t, f, ack, outcome.Ack())
			advisorySettle(t, f, drop, outcome.Drop())
			advisorySettle(t, f, retry, outcome.Retry())
			advisorySettle(t, f, later, outcome.RetryAfter(time.Hour))
			in := "(?, ?)"
			if b.name == "postgres" {
				in = "($1, $2)"
			}
			if stamped := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)+" WHERE "+q("processed_at")+" IS NOT NULL AND "+q("id")+" IN "+in, ack.ID, drop.ID); stamped != 2 {
				t.Fatalf("ack and drop stamped %d rows, want 2", stamped)
			}
			if err := f.Settle(context.Background(), ack, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("settling a delivery twice: %v, want ErrClosed", err)
			}

			// The retried row comes back at once, its attempt counted by the take; the delayed row
			// does not.
			again := advisoryClaim(t, other, 10)
			if len(again) != 1 || again[0].ID != retry.ID || again[0].Attempt != 2 {
				t.Fatalf("after retry and retry-after claimed %v (attempt %v), want row %d at attempt 2", advisoryIDs(again), again, retry.ID)
			}
			if err := other.Release(context.Background(), again[0]); err != nil {
				t.Fatal(err)
			}
			if err := other.Extend(context.Background(), again[0]); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("extending a released delivery: %v, want ErrClosed", err)
			}
			released := advisoryClaim(t, f, 10)
			if len(released) != 1 || released[0].ID != retry.ID || released[0].Attempt != 3 {
				t.Fatalf("after release claimed %v, want row %d at attempt 3", advisoryIDs(released), retry.ID)
			}

			// Close gives the held row back; its settlement then fails with ErrClosed.
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := f.Settle(context.Background(), released[0], outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("settling after Close: %v, want ErrClosed", err)
			}
			back := advisoryClaim(t, other, 10)
			if len(back) != 1 || back[0].ID != retry.ID {
				t.Fatalf("after Close claimed %v, want row %d back", advisoryIDs(back), retry.ID)
			}
			advisorySettle(t, other, back[0], outcome.Ack())
			if _, err := f.Claim(context.Background(), 1); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("claiming after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestAdvisoryMinimalTable covers a table with no attempt, processed_at or retry_after column:
// the take only re-reads, Ack deletes, and RetryAfter retries at once.
func TestAdvisoryMinimalTable(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := minimalTable(tableName(t))
			b.createTable(t, db, tbl)
			q := func(s string) string { s, _ = b.dialect.Quote(s); return s }
			advisoryEnqueue(t, b, db, tbl, "", 3)

			f := advisoryForm(t, b, tbl, tbl.Name+":{id}")
			advisoryOpen(t, f, db, inbox.Queue{})
			ds := advisoryClaim(t, f, 3)
			if len(ds) != 3 || ds[0].Attempt != 0 {
				t.Fatalf("claimed %v, want 3 rows with attempt 0 (no attempt column)", advisoryIDs(ds))
			}
			advisorySettle(t, f, ds[0], outcome.Ack())
			advisorySettle(t, f, ds[1], outcome.Drop())
			advisorySettle(t, f, ds[2], outcome.RetryAfter(time.Hour))
			if n := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)); n != 1 {
				t.Fatalf("%d rows left, want 1 (ack and drop delete)", n)
			}
			again := advisoryClaim(t, f, 3)
			if len(again) != 1 || again[0].ID != ds[2].ID {
				t.Fatalf("claimed %v, want row %d back at once (no retry_after column)", advisoryIDs(again), ds[2].ID)
			}
			advisorySettle(t, f, again[0], outcome.Ack())
		})
	}
}

func TestAdvisoryTransactional(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := fullTable(tableName(t))
			b.createTable(t, db, tbl)
			q := func(s string) string { s, _ = b.dialect.Quote(s); return s }
			side := q(tbl.Name + "_side")
			mustExec(t, db, "DROP TABLE IF EXISTS "+side)
			mustExec(t, db, "CREATE TABLE "+side+" (id BIGINT PRIMARY KEY)")
			t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + side) })
			insert := "INSERT INTO " + side + " (id) VALUES (?)"
			if b.name == "postgres" {
				insert = "INSERT INTO " + side + " (id) VALUES ($1)"
			}
			advisoryEnqueue(t, b, db, tbl, "q", 4)

			f := advisoryForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, f, db, inbox.Queue{Name: "q", Transactional: true})
			ds := advisoryClaim(t, f, 4)
			if len(ds) != 4 {
				t.Fatalf("claimed %v, want 4", advisoryIDs(ds))
			}
			outcomes := []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Retry(), outcome.RetryAfter(time.Hour)}
			for i, d := range ds {
				if d.Tx == nil {
					t.Fatal("no transaction lent in transactional mode")
				}
				if _, err := d.Tx.ExecContext(context.Background(), insert, d.ID); err != nil {
					t.Fatal(err)
				}
				advisorySettle(t, f, d, outcomes[i])
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
			again := advisoryClaim(t, f, 4)
			if len(again) != 1 || again[0].ID != ds[2].ID {
				t.Fatalf("claimed %v, want the retried row %d", advisoryIDs(again), ds[2].ID)
			}
			advisorySettle(t, f, again[0], outcome.Ack())
		})
	}
}

func TestAdvisoryKeyTemplate(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			tbl := fullTable(tableName(t))
			db := b.open(t, 0)
			b.createTable(t, db, tbl)
			for _, key := range []string{"jobs-{id", "jobs-id}", "jobs-{}", "jobs-{{id}}", "it's-{id}", `a\b-{id}`, "jobs-{" + strings.Repeat("x", 70) + "}"} {
				_, err := advisoryForm(t, b, tbl, key).Open(context.Background(), db, inbox.Queue{Name: "q"})
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
					t.Errorf("template %q: %v, want an error naming the template", key, err)
				}
			}

			f := advisoryForm(t, b, tbl, tbl.Name+"-{account}")
			_, err := f.Open(context.Background(), db, inbox.Queue{Name: "q"})
			if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), tbl.Name+"-{account}") || !strings.Contains(err.Error(), "account") {
				t.Fatalf("a template over a column the table lacks: %v, want ErrSchema naming the template", err)
			}
			f.Close()
		})
	}
}

// advisoryAccountTable creates a full table with an account column the key renders.
func advisoryAccountTable(t *testing.T, b backend, db *sql.DB) inbox.Table {
	t.Helper()
	tbl := fullTable(tableName(t))
	b.createTable(t, db, tbl)
	name, _ := b.dialect.Quote(tbl.Name)
	mustExec(t, db, "ALTER TABLE "+name+" ADD COLUMN account INT")
	return tbl
}

// advisoryWait waits up to a generous bound for cond, failing with what otherwise.
func advisoryWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAdvisoryAccountsRunInTurn runs a key over an account column: each account's rows run one
// at a time, in claim order, while other accounts run alongside.
func TestAdvisoryAccountsRunInTurn(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := advisoryAccountTable(t, b, db)
			name, _ := b.dialect.Quote(tbl.Name)
			const accounts, perAccount = 4, 6
			advisoryEnqueue(t, b, db, tbl, "q", accounts*perAccount)
			mustExec(t, db, "UPDATE "+name+" SET account = id % "+fmt.Sprint(accounts))

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
			advisoryWait(t, "every row handled", func() bool {
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
}

// TestAdvisoryTwoConsumersNeverShareAKey runs two consumers (each with its own pool) over keys
// shared by several rows: no key is ever in work twice, and every row is handled exactly once.
func TestAdvisoryTwoConsumersNeverShareAKey(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := advisoryAccountTable(t, b, db)
			name, _ := b.dialect.Quote(tbl.Name)
			const accounts, rows = 8, 160
			advisoryEnqueue(t, b, db, tbl, "q", rows)
			mustExec(t, db, "UPDATE "+name+" SET account = id % "+fmt.Sprint(accounts))

			var (
				mu       sync.Mutex
				inWork   = map[int64]bool{} // account
				handled  = map[int64]int{}  // id → deliveries acked
				total    int
				failures []string
			)
			h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
				a := d.ID % accounts
				mu.Lock()
				if inWork[a] {
					failures = append(failures, fmt.Sprintf("account %d: row %d delivered while another row of the account was in work", a, d.ID))
				}
				inWork[a] = true
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inWork[a] = false
				handled[d.ID]++
				total++
				mu.Unlock()
				return outcome.Ack()
			})
			for range 2 {
				pool := b.open(t, 8)
				f := advisoryForm(t, b, tbl, tbl.Name+"-acct-{account}")
				startConsumer(t, inbox.NewConsumer(pool, f, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 10 * time.Millisecond}))
			}
			advisoryWait(t, "every row handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return total >= rows && count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE processed_at IS NULL") == 0
			})
			mu.Lock()
			defer mu.Unlock()
			for _, f := range failures {
				t.Error(f)
			}
			for id, n := range handled {
				if n != 1 {
					t.Errorf("row %d handled %d times", id, n)
				}
			}
			if len(handled) != rows {
				t.Errorf("%d rows handled, want %d", len(handled), rows)
			}
		})
	}
}

// TestAdvisoryPoolBudget holds every delivery unsettled: the consumer stops at the pool's size
// less one, and the application can still take a connection.
func TestAdvisoryPoolBudget(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			const pool = 4
			db := b.open(t, pool)
			tbl := fullTable(tableName(t))
			b.createTable(t, db, tbl)
			advisoryEnqueue(t, b, db, tbl, "q", 10)

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
			advisoryWait(t, fmt.Sprintf("%d deliveries in work", pool-1), func() bool {
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
}
