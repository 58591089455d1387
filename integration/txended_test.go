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
	"github.com/sqlinbox/inbox/outcome"
)

// TestDeadlockInHandlerEndsTheLentTransaction: two transactional handlers update two account
// rows through Delivery.Tx in opposite order, so that the database ends one of their
// transactions with a deadlock. The loser ignores the error, writes a side row through its Tx
// and returns Ack. Nothing of the loser's may land: its write before the deadlock was rolled
// back by the database, the write after must be refused (InnoDB would run it in autocommit), and
// its settlement must fail, so that its rows are delivered again and, in the end, every job
// has added to each account once and written one side row. In every form, single and batched,
// on Postgres (which refuses by itself) and on MariaDB under both the MySQL dialect (which
// judges by the error number) and its own (which asks the server).
//
// The "read" variants meet the deadlock in a locking read whose error only Row.Scan sees, not
// the guard: on MariaDB the guard asks the server before the next statement. The MySQL dialect
// cannot ask (MySQL has no @@in_transaction), so it has no such variant.
func TestDeadlockInHandlerEndsTheLentTransaction(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		if c.b.name == "sqlite" { // one writer: no deadlocks
			continue
		}
		for _, batch := range []bool{false, true} {
			for _, read := range []bool{false, true} {
				if read && (batch || c.b.name == "mysql") {
					continue
				}
				name := c.name() + "-single"
				if batch {
					name = c.name() + "-batch"
				}
				if read {
					name += "-read"
				}
				tests = append(tests, subtest{name, func(t *testing.T) { deadlockCell(t, c, batch, read) }})
			}
		}
	}
	runConcurrently(t, 4, tests)
}

func deadlockCell(t *testing.T, c cell, batch, read bool) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	accounts := tbl.Name + "_acc"
	c.b.scratchTable(t, db, accounts, "id INT PRIMARY KEY, balance INT NOT NULL")
	mustExec(t, db, "INSERT INTO "+c.q(t, accounts)+" (id, balance) VALUES (1, 0), (2, 0)")
	side := tbl.Name + "_side"
	c.createSide(t, db, side)

	jobs := 2 // single: two jobs, one per handler; batches: two batches of two
	if batch {
		jobs = 4
	}
	for range jobs {
		c.publish(t, db, tbl, inbox.Message{Queue: "q"})
	}
	ids := c.ids(t, db, tbl, "")

	add := "UPDATE " + c.q(t, accounts) + " SET balance = balance + " + c.ph(1) + " WHERE id = " + c.ph(2)
	lock := "SELECT balance FROM " + c.q(t, accounts) + " WHERE id = " + c.ph(1) + " FOR UPDATE"
	insert := "INSERT INTO " + c.q(t, side) + " (job_id, attempt) VALUES (" + c.ph(1) + ", " + c.ph(2) + ")"
	sideRows := func(id int64) int {
		return count(t, db, "SELECT COUNT(*) FROM "+c.q(t, side)+" WHERE job_id = "+c.ph(1), id)
	}

	var (
		mu         sync.Mutex
		deliveries = map[int64]int{}
		handlers   int // first-round handlers
		arrived    int // first-round handlers that took their first account's lock
		barrier    = make(chan struct{})
		returned   int // first-round handlers that returned
		roundOver  = make(chan struct{})
		losers     []string // what each deadlock's loser saw
		errs       []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// handle is one handler call on the rows of ds (one, or a batch). The first two calls are
	// the first round: each adds to its first account, waits for the other to have done the
	// same, then adds to the other account, one of them deadlocking. Later calls (the loser's
	// rows delivered again) wait for the first round's handlers to return, so that they take no
	// lock the winner still waits for, then just do their work.
	handle := func(ctx context.Context, ds []*inbox.Delivery) outcome.Outcome {
		mu.Lock()
		round := 0
		nth := make([]int, len(ds)) // which delivery of its row each is
		for i, d := range ds {
			deliveries[d.ID]++
			nth[i] = deliveries[d.ID]
			round = max(round, nth[i])
		}
		firstRound := round == 1 && handlers < 2
		order := [2]int{1, 2}
		if firstRound {
			if handlers == 1 {
				order = [2]int{2, 1}
			}
			handlers++
		}
		mu.Unlock()
		if firstRound {
			defer func() {
				mu.Lock()
				if returned++; returned == 2 {
					close(roundOver)
				}
				mu.Unlock()
			}()
		}
		if round > 1 {
			select {
			case <-roundOver:
			case <-time.After(20 * time.Second):
				fail("rows %v: the first round's handlers did not return within 20 s", deliveryIDs(ds))
			}
			// Delivered again after the deadlock: nothing of the first delivery may have landed.
			for _, d := range ds {
				if n := sideRows(d.ID); n != 0 {
					fail("row %d delivered again with %d side row(s) committed by its failed delivery: the write after the deadlock landed", d.ID, n)
				}
			}
		}
		tx := ds[0].Tx
		n := len(ds)
		if _, err := tx.ExecContext(ctx, add, n, order[0]); err != nil {
			fail("rows %v: the first update: %v", deliveryIDs(ds), err)
			return outcome.Retry()
		}
		if firstRound {
			mu.Lock()
			if arrived++; arrived == 2 {
				close(barrier)
			}
			mu.Unlock()
			select {
			case <-barrier:
			case <-time.After(20 * time.Second):
				fail("rows %v: the other handler did not take its first account lock within 20 s", deliveryIDs(ds))
			}
		}
		var err error
		if read {
			var balance int
			err = tx.QueryRowContext(ctx, lock, order[1]).Scan(&balance)
			if err == nil {
				_, err = tx.ExecContext(ctx, add, n, order[1])
			}
		} else {
			_, err = tx.ExecContext(ctx, add, n, order[1])
		}
		// The loser ignores the deadlock and goes on writing, through another delivery's Tx
		// in a batch (they share the transaction).
		var after []error
		for i, d := range ds {
			_, werr := d.Tx.ExecContext(ctx, insert, d.ID, nth[i])
			after = append(after, werr)
		}
		if err != nil {
			mu.Lock()
			losers = append(losers, fmt.Sprintf("rows %v: deadlock %v; writes after it: %v", deliveryIDs(ds), err, after))
			mu.Unlock()
			for i, werr := range after {
				switch {
				case werr == nil:
					fail("row %d: the write after the deadlock was accepted", ds[i].ID)
				case c.b.name != "postgres" && !errors.Is(werr, inbox.ErrTransactionEnded):
					fail("row %d: the write after the deadlock failed with %v, want inbox.ErrTransactionEnded", ds[i].ID, werr)
				case c.b.name != "postgres" && (!strings.Contains(werr.Error(), tbl.Name) || !strings.Contains(werr.Error(), fmt.Sprint(ds[0].ID))):
					fail("row %d: the refusal %q names neither the table %q nor the row", ds[i].ID, werr, tbl.Name)
				}
			}
		} else {
			for i, werr := range after {
				if werr != nil {
					fail("row %d: writing the side row: %v", ds[i].ID, werr)
				}
			}
		}
		return outcome.Ack()
	}

	cfg := &inbox.Config{Queue: "q", Workers: 2, Transactional: true, PollInterval: cellPoll, Logger: testLogger(t)}
	var stop func()
	if batch {
		h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
			o := handle(ctx, ds)
			os := make([]outcome.Outcome, len(ds))
			for i := range os {
				os[i] = o
			}
			return os
		})
		stop = startConsumer(t, inbox.NewBatchConsumer(db, c.newForm(t, tbl).(inbox.BatchForm), 2, h, cfg))
	} else {
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			return handle(ctx, []*inbox.Delivery{d})
		})
		stop = runConsumer(t, db, c.newForm(t, tbl), h, cfg)
	}
	waitFor(t, 60*time.Second, "every job to settle", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == jobs
	})
	stop()

	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	if len(losers) != 1 {
		t.Fatalf("%d handlers met a deadlock, want 1 (%v)", len(losers), losers)
	}
	t.Logf("the loser: %s", losers[0])
	again := 0
	for _, id := range ids {
		if deliveries[id] > 1 {
			again++
		}
	}
	if want := jobs / 2; again != want {
		t.Errorf("%d rows were delivered again after the deadlock, want %d (the loser's): deliveries %v", again, want, deliveries)
	}
	for _, acc := range []int{1, 2} {
		var balance int
		if err := db.QueryRow("SELECT balance FROM "+c.q(t, accounts)+" WHERE id = "+c.ph(1), acc).Scan(&balance); err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if balance != jobs {
			t.Errorf("account %d holds %d, want %d: every job adds to it once", acc, balance, jobs)
		}
	}
	for _, id := range ids {
		if n := sideRows(id); n != 1 {
			t.Errorf("row %d has %d side rows, want 1", id, n)
		}
	}
}
