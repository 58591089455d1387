package integration

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// TestSettlementConnectionLost (issue 22): on every server cell, transactional and not, the
// connection of a row's first settlement (an Ack) is killed from the server's side while the
// settlement runs. That is not the row's failure: the settlement runs no back-off, so the row
// returns by its form's rule with no attempt counted for the settlement (the row lock form's
// next delivery reads the same attempt, the others' one more, which their claim counted), no
// last error written, and the consumer warns that the connection was lost rather than logging
// a failed settlement at ERROR. The row is then handled again and settles.
func TestSettlementConnectionLost(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		if c.b.name == "sqlite" {
			continue // no server connection to kill
		}
		for _, transactional := range []bool{false, true} {
			tests = append(tests, subtest{c.name() + "-" + txMode(transactional), func(t *testing.T) {
				settleConnectionLost(t, c, transactional)
			}})
		}
	}
	// One cell at a time: with two cells on one MariaDB server, the kill of one cell's
	// settlement left its transaction waiting for the lock, and the other cell's settlement
	// session was then in neither the server's process list nor its lock waits, so that its wait
	// could not be seen and the kill never came.
	runConcurrently(t, 1, tests)
}

func settleConnectionLost(t *testing.T, c cell, transactional bool) {
	dsn := c.dsn(t)
	admin := c.openDSN(t, dsn, 4)
	tbl := c.b.newTable(t, admin, deadTable)
	c.publish(t, admin, tbl, inbox.Message{Queue: "q", Payload: []byte("p")})
	id := c.ids(t, admin, tbl, "")[0]

	// The lease form settles through the pool, which runs a statement again on another
	// connection when its driver finds its connection gone before sending it: the kill must land
	// while the settlement's statement runs. A transaction of the test's holds the row's lock
	// from the end of the first delivery's handler, so that the settlement waits for it, and
	// the settlement's session is killed while it waits. The row lock and advisory forms settle
	// on the connection that holds the row: that one is killed just before the settlement's
	// first statement.
	var (
		pool    *hooks // set before the consumer runs, and so before on reads it
		mu      sync.Mutex
		blocker *sql.Tx
		killed  bool
		kills   sync.WaitGroup
	)
	t.Cleanup(kills.Wait)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if blocker != nil {
			blocker.Rollback() // done already where the kill came
		}
	})
	kill := func(session int64) {
		if err := c.killSession(context.Background(), admin, session); err != nil {
			t.Errorf("killing the settlement's session: %v", err)
		}
	}
	on := func(ev hookEvent) {
		if ev.after || ev.what == "rollback" || ev.phase.name != "settle" || ev.phase.id != id {
			return
		}
		if c.form == "lease" && ev.what != "exec" && ev.what != "query" {
			// A prepare, or the pool handing a connection out, waits for no lock, and the
			// statement may then run on another connection: under load the test once waited 30 s
			// for a session that never ran it.
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if killed {
			return
		}
		killed = true
		if c.form != "lease" {
			kill(ev.conn.session)
			return
		}
		kills.Add(1)
		go func() {
			defer kills.Done()
			// Called off the test's goroutine: it reports, and may not stop the test.
			if !eventually(30*time.Second, func() bool { return c.waitsForLock(admin, ev.conn.session) }) {
				t.Errorf("the settlement's session %d did not wait for the row's lock within 30 s; its first statement was %s %q; the pool's sessions %v have these transactions open:\n%s",
					ev.conn.session, ev.what, ev.query, pool.sessions(), strings.Join(c.openTransactions(t, admin, pool.sessions()), "\n"))
			}
			kill(ev.conn.session)
			mu.Lock()
			defer mu.Unlock()
			if blocker != nil {
				blocker.Rollback()
			}
		}()
	}
	db, hooked, err := hookedDB(c.b, dsn, on)
	if err != nil {
		t.Fatal(err)
	}
	pool = hooked
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })

	rec := newDelivered()
	var logs inboxtest.Log
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		if c.form == "lease" && len(rec.get(d.ID)) == 1 {
			tx, err := admin.BeginTx(context.Background(), nil) // held past the handler, until the kill
			if err == nil {
				var locked int64
				err = tx.QueryRow("SELECT "+c.q(t, tbl.ID)+" FROM "+c.q(t, tbl.Name)+" WHERE "+c.q(t, tbl.ID)+" = "+c.ph(1)+" FOR UPDATE", d.ID).Scan(&locked)
			}
			if err != nil {
				t.Errorf("locking the row: %v", err)
			}
			mu.Lock()
			blocker = tx
			mu.Unlock()
		}
		return outcome.Ack()
	})
	// The lease is long enough that no extension, which would wait for the test's lock as the
	// settlement does and hold the settlement back, falls due before the first settlement, even
	// on a loaded machine (a 4 s lease, extended after 2 s, was not); the row returns after it.
	stop := runConsumer(t, db, &phasedForm{inner: c.newFormLease(t, tbl, 10*time.Second)}, h, &inbox.Config{
		Queue: "q", Transactional: transactional, Retry: lifecyclePolicy, Logger: logs.Logger(slog.LevelInfo),
	})
	waitFor(t, 45*time.Second, "the row to settle", func() bool {
		return len(c.ids(t, admin, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
	})
	stop()
	rec.check(t)

	mu.Lock()
	struck := killed
	mu.Unlock()
	if !struck {
		t.Fatal("the settlement's connection was never killed")
	}
	got := rec.get(id)
	var attempts []int
	for _, s := range got {
		attempts = append(attempts, s.attempt)
	}
	want := []int{1, 1} // the row lock form counts only settled retries
	if c.crashCounts {
		want = []int{1, 2} // the claim counts every delivery
	}
	if len(attempts) != 2 || attempts[0] != want[0] || attempts[1] != want[1] {
		t.Errorf("the row's deliveries read attempts %v, want %v: the lost settlement counted an attempt", attempts, want)
	}
	var last sql.NullString
	if err := admin.QueryRow("SELECT "+c.q(t, tbl.LastError)+" FROM "+c.q(t, tbl.Name)+" WHERE "+c.q(t, tbl.ID)+" = "+c.ph(1), id).Scan(&last); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("reading the row's last error: %v", err)
	}
	if last.String != "" {
		t.Errorf("the row's last error is %q: the lost settlement was backed off as the row's failure", last.String)
	}
	out := logs.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "settlement failed") {
			t.Errorf("the lost connection was logged as a failed settlement at ERROR:\n%s", line)
		}
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "connection was lost") {
		t.Errorf("the consumer did not warn that the settlement's connection was lost:\n%s", lastLines(out, 20))
	}
}

// waitsForLock reports whether server session id waits for a row lock: its statement has been
// sent and runs.
func (c cell) waitsForLock(admin *sql.DB, id int64) bool {
	query := "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'"
	if c.b.name == "postgres" {
		query = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'"
	}
	var n int
	return admin.QueryRow(query, id).Scan(&n) == nil && n == 1
}
