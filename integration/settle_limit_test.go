package integration

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// TestSettlementThatCannotCommitStopsAtTheLimit (issue 22, defect 2): on every cell, single and
// batch, transactional and not, a row whose ack the database always refuses (another table's
// foreign key, or on SQLite a trigger, refuses its DELETE) on a table without dead_at, whose
// death is that same refused DELETE, with RetryAtOnce: it is delivered exactly MaxAttempts
// times, at attempts 1 to MaxAttempts, then never again, while a row published after it is
// handled; the row stays in the table with its attempt at the limit; and the consumer says once,
// at ERROR, which row can neither settle nor die and why.
func TestSettlementThatCannotCommitStopsAtTheLimit(t *testing.T) {
	runSuite(t, func(c cell) []cellTest {
		var tests []cellTest
		for _, m := range lifecycleModes(c) {
			tests = append(tests, cellTest{m.String(), func(t *testing.T, c cell) { settleNeverCommits(t, c, m) }})
		}
		return tests
	})
}

// refusedDeleteTable creates a table with an attempt column and neither processed_at (an ack
// deletes), dead_at (a death deletes) nor retry_after (retries are at once), whose DELETE of
// the rows refused reports is refused: by another table's foreign key, or on SQLite by a
// trigger on the payload "held".
func refusedDeleteTable(t *testing.T, c cell, db *sql.DB) (tbl inbox.Table, refused func(id int64)) {
	tbl = fullTable(tableName(t))
	tbl.ProcessedAt, tbl.RetryAfter = "", ""
	c.b.createTable(t, db, tbl)
	if c.b.name == "sqlite" {
		mustExec(t, db, "CREATE TRIGGER "+c.q(t, tbl.Name+"_held")+" BEFORE DELETE ON "+c.q(t, tbl.Name)+
			" WHEN OLD."+c.q(t, tbl.Payload)+" = CAST('held' AS BLOB) BEGIN SELECT RAISE(ABORT, 'a note refers to the job'); END")
		return tbl, func(int64) {}
	}
	notes := tbl.Name + "_notes"
	mustExec(t, db, "DROP TABLE IF EXISTS "+c.q(t, notes))
	mustExec(t, db, "CREATE TABLE "+c.q(t, notes)+" (job_id BIGINT NOT NULL, FOREIGN KEY (job_id) REFERENCES "+c.q(t, tbl.Name)+" ("+c.q(t, tbl.ID)+"))")
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + c.q(t, notes)) })
	return tbl, func(id int64) {
		mustExec(t, db, "INSERT INTO "+c.q(t, notes)+" (job_id) VALUES ("+c.ph(1)+")", id)
	}
}

func settleNeverCommits(t *testing.T, c cell, m lifecycleMode) {
	const maxAttempts = 3
	db := c.b.open(t, 8)
	tbl, refuse := refusedDeleteTable(t, c, db)
	c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("held")})
	held := c.ids(t, db, tbl, "")[0]
	refuse(held)

	rec := newDelivered()
	var logs inboxtest.Log
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		rec.start(d)
		defer rec.end(d)
		return outcome.Ack()
	})
	stop := runLifecycle(t, c, db, tbl, m, h, &inbox.Config{Queue: "q", Retry: inbox.RetryAtOnce, MaxAttempts: maxAttempts, Logger: logs.Logger(slog.LevelInfo)})
	waitFor(t, 30*time.Second, fmt.Sprintf("the held row's %d deliveries", maxAttempts), func() bool { return len(rec.get(held)) >= maxAttempts })
	// The row lock and advisory forms give a row back as its settlement ends, the lease form
	// when its lease runs out: past that, a claim that may take the row takes it before a row
	// published later, which comes after it in claim order.
	time.Sleep(2 * cellLease)
	good := c.publishEach(t, db, tbl, "q", "good")[0]
	waitFor(t, 30*time.Second, "the row published after it to be handled", func() bool { return len(rec.get(good)) > 0 })
	time.Sleep(2 * cellPoll)
	stop()
	rec.check(t)

	got := rec.get(held)
	var attempts []int
	for _, s := range got {
		attempts = append(attempts, s.attempt)
	}
	if len(got) != maxAttempts {
		t.Errorf("the row that can neither settle nor die was delivered %d times (attempts %v), want %d (MaxAttempts)", len(got), lastOf(attempts, 10), maxAttempts)
	}
	for i, a := range attempts[:min(len(attempts), maxAttempts)] {
		if a != i+1 {
			t.Errorf("delivery %d read attempt %d, want %d (attempts %v)", i+1, a, i+1, lastOf(attempts, 10))
		}
	}
	var attempt int
	if err := db.QueryRow("SELECT "+c.q(t, tbl.Attempt)+" FROM "+c.q(t, tbl.Name)+" WHERE "+c.q(t, tbl.ID)+" = "+c.ph(1), held).Scan(&attempt); err != nil {
		t.Fatalf("reading the held row: %v", err)
	}
	if attempt != maxAttempts {
		t.Errorf("the held row's attempt column is %d, want %d: at the limit, where no claim takes it", attempt, maxAttempts)
	}

	// A consumer's search for unclaimable rows names it.
	f := c.newForm(t, tbl)
	plan, err := f.Open(context.Background(), db, inbox.Binding{Name: "q", MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatalf("opening a form to search for unclaimable rows: %v", err)
	}
	found, err := plan.FindUnclaimable(context.Background())
	f.Close()
	if err != nil {
		t.Fatalf("searching for unclaimable rows: %v", err)
	}
	if len(found) != 1 || !slices.Equal(found[0].IDs, []int64{held}) || !strings.Contains(found[0].Why, "MaxAttempts") {
		t.Errorf("unclaimable rows found: %+v, want the held row %d, at MaxAttempts", found, held)
	}

	out := logs.String()
	said := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "can neither settle nor die") {
			said++
			for _, want := range []string{fmt.Sprint(held), tbl.Name, `queue=q`, "DeadAt", "note"} {
				if !strings.Contains(line, want) {
					t.Errorf("the ERROR line does not name %q:\n%s", want, line)
				}
			}
		}
	}
	if said != 1 {
		t.Errorf("the row that can neither settle nor die was reported at ERROR %d times, want once:\n%s", said, lastLines(out, 20))
	}
	if n := strings.Count(out, "level=ERROR"); n > 2 {
		t.Errorf("%d lines at ERROR, want at most two (the first failed settlement, then the row at its limit):\n%s", n, lastLines(out, 20))
	}
}

// lastOf is the last n of xs.
func lastOf(xs []int, n int) []int { return xs[max(0, len(xs)-n):] }
