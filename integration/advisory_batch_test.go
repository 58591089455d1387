package integration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// advisoryBatchForm builds the advisory form for the backend as a batch form.
func advisoryBatchForm(t *testing.T, b backend, tbl inbox.Table, key string) inbox.BatchForm {
	t.Helper()
	bf, ok := advisoryForm(t, b, tbl, key).(inbox.BatchForm)
	if !ok {
		t.Fatal("the advisory form does not implement inbox.BatchForm")
	}
	return bf
}

func advisoryBatchClaim(t *testing.T, f inbox.BatchForm, max int) []*inbox.Delivery {
	t.Helper()
	ds, err := f.ClaimBatch(context.Background(), max)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// advisoryBatchParams are the backend's first n placeholders.
func advisoryBatchParams(b backend, n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "?"
		if b.name == "postgres" {
			ps[i] = fmt.Sprintf("$%d", i+1)
		}
	}
	return ps
}

// advisoryBatchIn is "IN (…)" over the backend's first n placeholders.
func advisoryBatchIn(b backend, n int) string {
	return "IN (" + strings.Join(advisoryBatchParams(b, n), ", ") + ")"
}

// advisoryBatchWait waits for cond, failing with what after a bound generous enough for a drain
// on a machine shared with other test runs (a few seconds on a quiet one).
func advisoryBatchWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdvisoryBatchDrain drains 2,000 rows with two batch consumers (each with its own pool) of
// four workers each: every row is handled exactly once.
func TestAdvisoryBatchDrain(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := fullTable(tableName(t))
			b.createTable(t, db, tbl)
			name, _ := b.dialect.Quote(tbl.Name)
			const rows = 2000
			advisoryEnqueue(t, b, db, tbl, "q", rows)

			var (
				mu      sync.Mutex
				handled = map[int64]int{}
				total   int
				biggest int
			)
			h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
				outs := make([]outcome.Outcome, len(ds))
				mu.Lock()
				defer mu.Unlock()
				biggest = max(biggest, len(ds))
				for i, d := range ds {
					handled[d.ID]++
					total++
					outs[i] = outcome.Ack()
				}
				return outs
			})
			for range 2 {
				pool := b.open(t, 8)
				f := advisoryBatchForm(t, b, tbl, tbl.Name+"-{id}")
				startConsumer(t, inbox.NewBatchConsumer(pool, f, 32, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 10 * time.Millisecond}))
			}
			advisoryBatchWait(t, "every row handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return total >= rows && count(t, db, "SELECT COUNT(*) FROM "+name+" WHERE processed_at IS NULL") == 0
			})
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
			if biggest < 2 {
				t.Errorf("no batch held more than %d row", biggest)
			}
		})
	}
}

// TestAdvisoryBatchAccountsNeverShared runs two batch consumers over a key on an account column:
// no two batches, of one consumer or of both, ever hold rows of one account at once, a batch
// holds one row per account, and every row is handled exactly once.
func TestAdvisoryBatchAccountsNeverShared(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := advisoryAccountTable(t, b, db)
			name, _ := b.dialect.Quote(tbl.Name)
			const accounts, rows = 12, 600
			advisoryEnqueue(t, b, db, tbl, "q", rows)
			mustExec(t, db, "UPDATE "+name+" SET account = id % "+fmt.Sprint(accounts))

			var (
				mu       sync.Mutex
				inWork   = map[int64]bool{} // account
				handled  = map[int64]int{}  // id → deliveries
				total    int
				shared   int // batches that held several accounts
				failures []string
			)
			h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
				mu.Lock()
				for _, d := range ds {
					a := d.ID % accounts
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
				defer mu.Unlock()
				outs := make([]outcome.Outcome, len(ds))
				for i, d := range ds {
					inWork[d.ID%accounts] = false
					handled[d.ID]++
					total++
					outs[i] = outcome.Ack()
				}
				return outs
			})
			for range 2 {
				pool := b.open(t, 8)
				f := advisoryBatchForm(t, b, tbl, tbl.Name+"-acct-{account}")
				startConsumer(t, inbox.NewBatchConsumer(pool, f, 8, h, &inbox.Config{Queue: "q", Workers: 3, PollInterval: 10 * time.Millisecond}))
			}
			advisoryBatchWait(t, "every row handled", func() bool {
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
			if shared == 0 {
				t.Error("no batch held more than one account")
			}
		})
	}
}

// TestAdvisoryBatchOutcomes settles one batch with an outcome of each kind, two RetryAfter
// delays among them: each row settles by its own, another consumer finds the batch's keys held
// until then, and a delivery of the batch cannot be settled alone.
func TestAdvisoryBatchOutcomes(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := fullTable(tableName(t))
			b.createTable(t, db, tbl)
			q := func(s string) string { s, _ = b.dialect.Quote(s); return s }
			advisoryEnqueue(t, b, db, tbl, "q", 6)
			advisoryEnqueue(t, b, db, tbl, "other", 1)

			f := advisoryBatchForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, f, db, inbox.Queue{Name: "q"})
			ds := advisoryBatchClaim(t, f, 10)
			if len(ds) != 6 {
				t.Fatalf("claimed %v, want the queue's 6 rows", advisoryIDs(ds))
			}
			for i, d := range ds {
				if want := fmt.Sprintf("m%d", i+1); string(d.Payload) != want || d.Attempt != 1 || d.Queue != "q" {
					t.Fatalf("delivery %d: payload %q attempt %d group %q; want %q, 1, q (claim order)", i, d.Payload, d.Attempt, d.Queue, want)
				}
			}
			other := advisoryBatchForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, other, db, inbox.Queue{Name: "q"})
			if got := advisoryBatchClaim(t, other, 10); len(got) != 0 {
				t.Fatalf("a second consumer claimed %v while the batch held every row", advisoryIDs(got))
			}
			if err := f.Settle(context.Background(), ds[0], outcome.Ack()); err == nil || errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("Settle on a delivery of a batch: %v, want an error pointing to SettleBatch", err)
			}
			if err := f.Extend(context.Background(), ds[5]); err != nil {
				t.Fatalf("Extend on a delivery of the batch: %v", err)
			}

			outs := []outcome.Outcome{outcome.Ack(), outcome.Drop(), outcome.Retry(), outcome.RetryAfter(time.Hour), outcome.RetryAfter(2 * time.Hour), outcome.Ack()}
			if err := f.SettleBatch(context.Background(), ds, outs); err != nil {
				t.Fatal(err)
			}
			id := func(i int) int64 { return ds[i].ID }
			if n := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)+" WHERE processed_at IS NOT NULL AND id "+advisoryBatchIn(b, 3), id(0), id(1), id(5)); n != 3 {
				t.Fatalf("ack, drop and ack stamped %d rows, want 3", n)
			}
			if n := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)+" WHERE processed_at IS NOT NULL"); n != 3 {
				t.Fatalf("%d rows stamped, want only the batch's 3 acks and drops", n)
			}
			settledAt := time.Now()
			for i, delay := range map[int]time.Duration{3: time.Hour, 4: 2 * time.Hour} {
				p := advisoryBatchParams(b, 3)
				sel := "SELECT COUNT(*) FROM " + q(tbl.Name) + " WHERE id = " + p[0] + " AND retry_after BETWEEN " + p[1] + " AND " + p[2]
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
			again := advisoryBatchClaim(t, other, 10)
			if len(again) != 1 || again[0].ID != id(2) || again[0].Attempt != 2 {
				t.Fatalf("after the batch claimed %v, want row %d at attempt 2", advisoryIDs(again), id(2))
			}
			if err := other.SettleBatch(context.Background(), again, []outcome.Outcome{outcome.Ack()}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAdvisoryBatchTransactional: the batch's deliveries share one transaction; a batch of Acks
// commits the handler's writes with the settlements, and a batch with one Retry rolls them all
// back and retries its Acks.
func TestAdvisoryBatchTransactional(t *testing.T) {
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
			insert := "INSERT INTO " + side + " (id) VALUES (" + advisoryBatchParams(b, 1)[0] + ")"
			advisoryEnqueue(t, b, db, tbl, "q", 6)

			f := advisoryBatchForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, f, db, inbox.Queue{Name: "q", Transactional: true})
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
				return count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)+" WHERE processed_at IS NOT NULL")
			}

			acks := advisoryBatchClaim(t, f, 3)
			if len(acks) != 3 {
				t.Fatalf("claimed %v, want 3", advisoryIDs(acks))
			}
			handle(acks)
			if err := f.SettleBatch(context.Background(), acks, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()}); err != nil {
				t.Fatal(err)
			}
			if n := count(t, db, "SELECT COUNT(*) FROM "+side); n != 3 {
				t.Fatalf("%d handler writes committed, want the batch's 3", n)
			}
			if n := processed(); n != 3 {
				t.Fatalf("%d rows settled, want the 3 acked with their writes", n)
			}

			mixed := advisoryBatchClaim(t, f, 3)
			if len(mixed) != 3 {
				t.Fatalf("claimed %v, want the other 3", advisoryIDs(mixed))
			}
			handle(mixed)
			if err := f.SettleBatch(context.Background(), mixed, []outcome.Outcome{outcome.Ack(), outcome.Retry(), outcome.Ack()}); err != nil {
				t.Fatal(err)
			}
			if _, err := mixed[0].Tx.ExecContext(context.Background(), insert, -1); !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Fatalf("the transaction after settlement: %v, want ErrTransactionHeld", err)
			}
			if n := count(t, db, "SELECT COUNT(*) FROM "+side); n != 3 {
				t.Fatalf("%d handler writes committed, want none of the batch with a Retry (3 before)", n)
			}
			if n := processed(); n != 3 {
				t.Fatalf("%d rows settled, want none of the batch with a Retry (3 before)", n)
			}
			again := advisoryBatchClaim(t, f, 3)
			got := advisoryIDs(again)
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			if fmt.Sprint(got) != fmt.Sprint(advisoryIDs(mixed)) || again[0].Attempt != 2 {
				t.Fatalf("claimed %v, want the whole batch %v back at attempt 2, its Acks retried", got, advisoryIDs(mixed))
			}
			if err := f.ReleaseBatch(context.Background(), again); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAdvisoryBatchReleaseAndClose: ReleaseBatch and Close give a batch's rows back at once, to
// another consumer, their attempts counted.
func TestAdvisoryBatchReleaseAndClose(t *testing.T) {
	for _, b := range backends(t, false) {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 0)
			tbl := fullTable(tableName(t))
			b.createTable(t, db, tbl)
			advisoryEnqueue(t, b, db, tbl, "q", 3)

			f := advisoryBatchForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, f, db, inbox.Queue{Name: "q"})
			other := advisoryBatchForm(t, b, tbl, tbl.Name+"-{id}")
			advisoryOpen(t, other, db, inbox.Queue{Name: "q"})

			ds := advisoryBatchClaim(t, f, 3)
			if len(ds) != 3 {
				t.Fatalf("claimed %v, want 3", advisoryIDs(ds))
			}
			if err := f.Release(context.Background(), ds[0]); err == nil || errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("Release on a delivery of a batch: %v, want an error pointing to ReleaseBatch", err)
			}
			if err := f.ReleaseBatch(context.Background(), ds); err != nil {
				t.Fatal(err)
			}
			back := advisoryBatchClaim(t, other, 3)
			if fmt.Sprint(advisoryIDs(back)) != fmt.Sprint(advisoryIDs(ds)) || back[0].Attempt != 2 {
				t.Fatalf("after ReleaseBatch another consumer claimed %v, want %v at attempt 2", advisoryIDs(back), advisoryIDs(ds))
			}

			if err := other.Close(); err != nil {
				t.Fatal(err)
			}
			if err := other.SettleBatch(context.Background(), back, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()}); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("SettleBatch after Close: %v, want ErrClosed", err)
			}
			last := advisoryBatchClaim(t, f, 3)
			if fmt.Sprint(advisoryIDs(last)) != fmt.Sprint(advisoryIDs(ds)) || last[0].Attempt != 3 {
				t.Fatalf("after Close claimed %v, want %v at attempt 3", advisoryIDs(last), advisoryIDs(ds))
			}
			if err := f.SettleBatch(context.Background(), last, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
