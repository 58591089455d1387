package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// lifecyclePolicy is the suite's short retry policy: waits of [5, 10) ms, [10, 20) ms, [20, 40)
// ms, then [40, 80) ms.
var lifecyclePolicy = inbox.ExponentialBackoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond}

// lifecycleMode is how a lifecycle test consumes: single rows or batches, in transactional mode
// or not.
type lifecycleMode struct {
	batch, tx bool
}

func (m lifecycleMode) String() string {
	s := "single"
	if m.batch {
		s = "batch"
	}
	if m.tx {
		s += "-tx"
	}
	return s
}

// lifecycleModes are the modes of a cell: single rows and batches, each plain and, where the
// cell has it, transactional.
func lifecycleModes(c cell) []lifecycleMode {
	ms := []lifecycleMode{{}, {batch: true}}
	if c.transactional {
		ms = append(ms, lifecycleMode{tx: true}, lifecycleMode{batch: true, tx: true})
	}
	return ms
}

// runLifecycle runs a consumer of f in mode m, each row handled by h (a batch's rows one by
// one), until the returned stop is called or the test ends.
func runLifecycle(t *testing.T, c cell, db *sql.DB, tbl inbox.Table, m lifecycleMode, h inbox.HandlerFunc, cfg *inbox.Config) (stop func()) {
	t.Helper()
	cfg.Transactional = m.tx
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	batch := 0
	if m.batch {
		batch = 4
	}
	return startConsumerWithin(t, newConsumer(t, db, c.newForm(t, tbl), batch, h, cfg), 30*time.Second)
}

// lifecycleRow reads a row's attempt, dead_at (whether set), retry_after (whether set) and
// last_error.
func lifecycleRow(t *testing.T, c cell, db *sql.DB, tbl inbox.Table, id int64) (attempt int, dead, delayed bool, lastError string) {
	t.Helper()
	var deadAt, retryAfter, last sql.NullString
	err := db.QueryRow("SELECT "+c.q(t, tbl.Attempt)+", CAST("+c.q(t, tbl.DeadAt)+" AS CHAR(40)), CAST("+c.q(t, tbl.RetryAfter)+" AS CHAR(40)), "+c.q(t, tbl.LastError)+
		" FROM "+c.q(t, tbl.Name)+" WHERE "+c.q(t, tbl.ID)+" = "+c.ph(1), id).Scan(&attempt, &deadAt, &retryAfter, &last)
	if err != nil {
		t.Fatalf("reading row %d: %v", id, err)
	}
	return attempt, deadAt.Valid, retryAfter.Valid, last.String
}

// TestLifecycle states the failure lifecycle as promises of every cell, single and batch,
// transactional and not: a row that always fails is delivered MaxAttempts times, each retry
// after the policy's delay, then is dead (dead_at and last_error set) and never claimed again;
// Fail kills at once with its reason; Drop settles; the error adapter's four cases; a table
// without retry_after refused with the default policy; and an ack the database always refuses
// backs off (defect 5).
func TestLifecycle(t *testing.T) {
	runSuite(t, func(c cell) []cellTest {
		var tests []cellTest
		for _, m := range lifecycleModes(c) {
			tests = append(tests,
				cellTest{"dies/" + m.String(), func(t *testing.T, c cell) { lifecycleDies(t, c, m) }},
				cellTest{"refused ack backs off/" + m.String(), func(t *testing.T, c cell) { lifecycleRefusedAck(t, c, m) }})
		}
		return append(tests,
			cellTest{"fail and drop", lifecycleFailDrop},
			cellTest{"error adapter", lifecycleAdapter},
			cellTest{"no retry_after refused", lifecycleRefused})
	})
}

// lifecycleDies: a row that always returns Retry (with an error) is delivered MaxAttempts times
// at attempts 1 to 4, each retry no sooner than its band of the policy allows, then dies with
// "attempt 4 of 4: …" and is not delivered again while a good row published after it is.
func lifecycleDies(t *testing.T, c cell, m lifecycleMode) {
	db, tbl := c.b.openTable(t, 8, deadTable)
	c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("bad")})
	bad := c.ids(t, db, tbl, "")[0]
	rec := newDelivered()
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		if string(d.Payload) == "bad" {
			return outcome.Retry().WithError(fmt.Errorf("boom %d", d.Attempt))
		}
		return outcome.Ack()
	})
	stop := runLifecycle(t, c, db, tbl, m, h, &inbox.Config{Queue: "q", Retry: lifecyclePolicy, MaxAttempts: 4})
	waitFor(t, 20*time.Second, "the bad row to die", func() bool {
		_, dead, _, _ := lifecycleRow(t, c, db, tbl, bad)
		return dead
	})
	c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("good")})
	waitFor(t, 20*time.Second, "the good row to be handled", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
	})
	time.Sleep(100 * time.Millisecond) // a dead row claimed again would show by now
	stop()
	rec.check(t)

	got := rec.get(bad)
	if len(got) != 4 {
		t.Fatalf("the bad row was delivered %d times, want 4 (MaxAttempts)", len(got))
	}
	for i, s := range got {
		if s.attempt != i+1 {
			t.Errorf("delivery %d read attempt %d, want %d", i+1, s.attempt, i+1)
		}
		if i > 0 {
			floor := lifecyclePolicy.Base << (i - 1) / 2 // the band's lower end after attempt i
			if gap := s.at.Sub(got[i-1].at); gap < floor {
				t.Errorf("delivery %d came %v after the one before, sooner than the policy's %v", i+1, gap, floor)
			}
		}
	}
	attempt, dead, _, last := lifecycleRow(t, c, db, tbl, bad)
	if !dead || last != "attempt 4 of 4: boom 4" {
		t.Errorf("the dead row: dead_at set %v, last_error %q; want set, %q", dead, last, "attempt 4 of 4: boom 4")
	}
	if attempt < 3 {
		t.Errorf("the dead row's attempt column is %d, want its deliveries counted", attempt)
	}
}

// lifecycleFailDrop: Fail kills the row at once with its reason, Drop settles it (stamped
// processed_at, not dead), and neither is delivered again.
func lifecycleFailDrop(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, deadTable)
	c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("fail")}, inbox.Message{Queue: "q", Payload: []byte("drop")})
	ids := c.ids(t, db, tbl, "")
	rec := newDelivered()
	var logs inboxtest.Log
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		if string(d.Payload) == "fail" {
			return outcome.Fail(errors.New("bad input: no such customer"))
		}
		return outcome.Drop().WithError(errors.New("customer gone"))
	})
	stop := runLifecycle(t, c, db, tbl, lifecycleMode{}, h, &inbox.Config{Queue: "q", Retry: lifecyclePolicy, Logger: logs.Logger(slog.LevelInfo)})
	waitFor(t, 20*time.Second, "both rows to settle", func() bool {
		_, dead, _, _ := lifecycleRow(t, c, db, tbl, ids[0])
		return dead && len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
	})
	time.Sleep(100 * time.Millisecond)
	stop()
	for _, id := range ids {
		if n := len(rec.get(id)); n != 1 {
			t.Errorf("row %d delivered %d times, want once", id, n)
		}
	}
	if _, _, _, last := lifecycleRow(t, c, db, tbl, ids[0]); last != "bad input: no such customer" {
		t.Errorf("the failed row's last_error is %q, want the Fail's reason", last)
	}
	if _, dead, _, _ := lifecycleRow(t, c, db, tbl, ids[1]); dead {
		t.Error("the dropped row is stamped dead")
	}
	if out := logs.String(); !strings.Contains(out, "customer gone") || !strings.Contains(out, "row is dead") {
		t.Errorf("the drop's reason or the dead row was not logged:\n%s", out)
	}
}

// lifecycleAdapter: inbox.Func's four cases: nil acks; an error retries by the policy (the row
// comes back at attempt 2, its error kept meanwhile); Permanent kills at once; RetryIn retries
// after its own delay.
func lifecycleAdapter(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, deadTable)
	names := []string{"ok", "flaky", "permanent", "later"}
	ids := c.publishEach(t, db, tbl, "q", names...)
	rec := newDelivered()
	const later = 300 * time.Millisecond
	h := inbox.Func(func(ctx context.Context, d *inbox.Delivery) error {
		rec.start(d)
		defer rec.end(d)
		switch string(d.Payload) {
		case "flaky":
			if d.Attempt == 1 {
				return errors.New("flaky once")
			}
		case "permanent":
			return fmt.Errorf("handling: %w", inbox.Permanent(errors.New("malformed order")))
		case "later":
			if d.Attempt == 1 {
				return inbox.RetryIn(later, errors.New("rate limited"))
			}
		}
		return nil
	})
	stop := runLifecycle(t, c, db, tbl, lifecycleMode{}, inbox.HandlerFunc(h.Handle), &inbox.Config{Queue: "q", Retry: lifecyclePolicy})
	waitFor(t, 20*time.Second, "every row to settle", func() bool {
		_, dead, _, _ := lifecycleRow(t, c, db, tbl, ids[2])
		return dead && len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 3
	})
	stop()
	want := []int{1, 2, 1, 2}
	for i, id := range ids {
		if n := len(rec.get(id)); n != want[i] {
			t.Errorf("%s: delivered %d times, want %d", names[i], n, want[i])
		}
	}
	if _, _, _, last := lifecycleRow(t, c, db, tbl, ids[1]); last != "flaky once" {
		t.Errorf("flaky: last_error %q, want the error of its failed attempt", last)
	}
	if _, _, _, last := lifecycleRow(t, c, db, tbl, ids[2]); last != "handling: malformed order" {
		t.Errorf("permanent: last_error %q, want the error's text", last)
	}
	if got := rec.get(ids[3]); len(got) == 2 && got[1].at.Sub(got[0].at) < later {
		t.Errorf("later: delivered again after %v, sooner than RetryIn's %v", got[1].at.Sub(got[0].at), later)
	}
}

// lifecycleRefused: the default policy delays, so a table without retry_after is refused at Run
// with ErrSchema naming the table, the column and the alternative.
func lifecycleRefused(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, minimalTable)
	cons := inbox.NewConsumer(db, c.newForm(t, tbl), inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome {
		return outcome.Ack()
	}), &inbox.Config{PollInterval: cellPoll})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cons.Run(ctx)
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), tbl.Name) || !strings.Contains(err.Error(), "RetryAfter") || !strings.Contains(err.Error(), "RetryAtOnce") {
		t.Fatalf("Run = %v, want ErrSchema naming the table, the RetryAfter column and RetryAtOnce", err)
	}
}

// lifecycleRefusedAck (defect 5): a row whose ack the database always refuses (another table's
// foreign key, or on SQLite a trigger, refuses its DELETE) is not delivered without pause: each
// failed settlement counts its attempt and backs the row off by the policy, with the
// settlement's error as its last, and the log says why once.
func lifecycleRefusedAck(t *testing.T, c cell, m lifecycleMode) {
	db := c.b.open(t, 8)
	tbl := deadTable(tableName(t))
	tbl.ProcessedAt = "" // so that the ack deletes
	notes := tbl.Name + "_notes"
	mustExec(t, db, "DROP TABLE IF EXISTS "+c.q(t, notes))
	c.b.createTable(t, db, tbl)
	if c.b.name == "sqlite" {
		mustExec(t, db, "CREATE TRIGGER "+c.q(t, notes)+" BEFORE DELETE ON "+c.q(t, tbl.Name)+" BEGIN SELECT RAISE(ABORT, 'a note refers to the job'); END")
	} else {
		mustExec(t, db, "CREATE TABLE "+c.q(t, notes)+" (job_id BIGINT NOT NULL, FOREIGN KEY (job_id) REFERENCES "+c.q(t, tbl.Name)+" ("+c.q(t, tbl.ID)+"))")
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + c.q(t, notes)) })
	}
	c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("held")})
	id := c.ids(t, db, tbl, "")[0]
	if c.b.name != "sqlite" {
		mustExec(t, db, "INSERT INTO "+c.q(t, notes)+" (job_id) VALUES ("+c.ph(1)+")", id)
	}
	rec := newDelivered()
	var logs inboxtest.Log
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		return outcome.Ack()
	})
	stop := runLifecycle(t, c, db, tbl, m, h, &inbox.Config{Queue: "q", Retry: inbox.ExponentialBackoff{Base: 100 * time.Millisecond, Max: time.Second}, MaxAttempts: -1, Logger: logs.Logger(slog.LevelInfo)})
	time.Sleep(1500 * time.Millisecond)
	stop()
	rec.check(t)
	n := len(rec.get(id))
	// Waits of [50, 100) ms, [100, 200) ms, [200, 400) ms, [400, 800) ms: at most 5 deliveries
	// fit in 1.5 s; without a back-off it was thousands.
	if n < 2 || n > 6 {
		t.Errorf("the row whose ack is refused was delivered %d times in 1.5 s, want a handful (2 to 6)", n)
	}
	attempt, _, delayed, last := lifecycleRow(t, c, db, tbl, id)
	if got := rec.get(id); len(got) > 0 && got[len(got)-1].attempt < 2 {
		t.Errorf("the last delivery read attempt %d: the failed settlements were not counted", got[len(got)-1].attempt)
	}
	if attempt < 1 || !delayed || !strings.Contains(last, "settlement failed") {
		t.Errorf("the row after its refused acks: attempt %d, retry_after set %v, last_error %q; want counted, set, the settlement's error", attempt, delayed, last)
	}
	if k := strings.Count(logs.String(), "level=ERROR msg=\"inbox: settlement failed"); k != 1 {
		t.Errorf("the failing settlement was logged at ERROR %d times, want once:\n%s", k, logs.String())
	}
}
