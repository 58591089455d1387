package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// TestOpenConnectionCut kills the server session under each statement a consumer's Open runs
// (pg_terminate_backend, KILL CONNECTION), one statement per Open, at every try Open gives it:
// a connection cut while Run starts is the connection's failure, never ErrSchema, so Run tries
// Open again within a poll interval and, once an Open meets no cut, drains its queue. Each
// statement is one a clean Open runs, learnt first from one; every one of them is cut.
func TestOpenConnectionCut(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		if c.b.name == "sqlite" {
			continue // no server session to kill
		}
		tests = append(tests, subtest{c.name(), func(t *testing.T) { openConnectionCut(t, c) }})
	}
	runConcurrently(t, 3, tests)
}

// openCuts is what the hook of openConnectionCut's pool cuts: the statements a clean Open
// runs, in order, the one the current Open cuts, and whether it met it.
type openCuts struct {
	mu      sync.Mutex
	targets []string
	next    int  // the target of the current Open
	met     bool // the current Open ran its target, and its session was killed
	cut     int  // targets met
	opens   []error
}

// at reports whether query, run by an Open, is the current Open's target, and notes that it
// was met.
func (o *openCuts) at(query string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.next >= len(o.targets) || o.targets[o.next] != query {
		return false
	}
	o.met = true
	return true
}

// opened ends an Open that returned err: the next Open cuts the next target, whether or not this
// one met its own (a statement an Open that failed earlier never reached is a later Open's).
func (o *openCuts) opened(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.met {
		o.cut++
	}
	if o.met || err == nil {
		o.next++
	}
	o.met = false
	o.opens = append(o.opens, err)
}

func (o *openCuts) done() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next >= len(o.targets)
}

// cutForm is a form whose every Open tells cuts how it ended.
type cutForm struct {
	phasedForm
	cuts *openCuts
}

func (f *cutForm) Open(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	plan, err := f.phasedForm.Open(ctx, db, q)
	f.cuts.opened(err)
	return plan, err
}

func openConnectionCut(t *testing.T, c cell) {
	dsn := c.dsn(t)
	admin := c.openDSN(t, dsn, 4)
	tbl := fullTable(tableName(t))
	c.b.createTable(t, admin, tbl)

	// A clean run: the statements its Open sends, each once, in order.
	var learnt collector[string]
	seen := map[string]bool{}
	var seenMu sync.Mutex
	learn, _, err := hookedDB(c.b, dsn, func(ev hookEvent) {
		seenMu.Lock()
		defer seenMu.Unlock()
		if !ev.after && ev.phase.name == "open" && ev.query != "" && !seen[ev.query] {
			seen[ev.query] = true
			learnt.add(ev.query)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	learn.SetMaxOpenConns(8)
	t.Cleanup(func() { learn.Close() })
	if err := drainOne(t, c, admin, learn, tbl, &openCuts{}); err != nil {
		t.Fatalf("a clean run: %v", err)
	}
	cuts := &openCuts{targets: learnt.all()}
	if len(cuts.targets) == 0 {
		t.Fatal("a clean Open ran no statement through the pool")
	}
	t.Logf("a clean Open's statements: %q", cuts.targets)

	// The cut runs: each Open kills the session under its target, at every try. An Open that
	// met no cut (its target's failure did not fail it) lets Run drain; the next run cuts on.
	db, _, err := hookedDB(c.b, dsn, func(ev hookEvent) {
		if ev.after || ev.phase.name != "open" || !cuts.at(ev.query) {
			return
		}
		if err := c.killSession(context.Background(), admin, ev.conn.session); err != nil {
			t.Errorf("killing the session under %q: %v", ev.query, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })
	for runs := 1; !cuts.done(); runs++ {
		if runs > len(cuts.targets) {
			t.Fatalf("%d runs did not cut every statement of Open: %d of %d cut", runs-1, cuts.next, len(cuts.targets))
		}
		if err := drainOne(t, c, admin, db, tbl, cuts); err != nil {
			t.Fatalf("Run, its Open cut under statement %d of %d (%q): %v", cuts.next, len(cuts.targets), cuts.targets[cuts.next-1], err)
		}
	}
	failed := 0
	for _, err := range cuts.opens {
		if err != nil {
			failed++
		}
	}
	if cuts.cut != len(cuts.targets) {
		t.Errorf("%d of the %d statements of a clean Open were cut: an Open ran without the others", cuts.cut, len(cuts.targets))
	}
	t.Logf("%d statements of Open cut, %d Opens failed and were tried again", cuts.cut, failed)
}

// drainOne publishes one row to tbl and runs a consumer of c's form on db, its Opens told to
// cuts, until the row is processed; it returns Run's error where Run returns first. What the
// consumer logs goes to the test's log.
func drainOne(t *testing.T, c cell, admin, db *sql.DB, tbl inbox.Table, cuts *openCuts) error {
	t.Helper()
	c.publish(t, admin, tbl, messages("q", 1)...)
	form := &cutForm{phasedForm{inner: c.newForm(t, tbl)}, cuts}
	h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
	log := &faultLog{t: t, Log: inboxtest.Log{}}
	cons := inbox.NewConsumer(db, form, h, &inbox.Config{Queue: "q", PollInterval: cellPoll, Logger: log.Logger(slog.LevelWarn)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	unprocessed := c.q(t, tbl.ProcessedAt) + " IS NULL"
	// Each Open a cut fails waits a poll interval before the next; a minute a statement is far
	// beyond what an Open takes, even on a loaded machine.
	deadline := time.Now().Add(time.Duration(len(cuts.targets)+1) * time.Minute)
	for c.b.countRows(t, admin, tbl, unprocessed) > 0 {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("Run returned nil before the row was processed")
			}
			return err
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the row was not processed by %v", deadline)
		}
	}
	cancel()
	return <-done
}
