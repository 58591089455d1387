package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
)

// TestSchedules refuses a table without a ticks table with the statement that creates it,
// creates a table with its ticks table (schema -apply -schedules), and lists its schedules
// before any ran and after a Periodic took ticks.
func TestSchedules(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			db, tg, name, _ := liveTable(t, l)
			ticks, _ := tg.dialect.Quote(inbox.TicksTable(name))
			db.Exec("DROP TABLE IF EXISTS " + ticks)
			t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + ticks) })

			if code, out, errOut := inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-apply"); code != 0 || strings.Contains(out, ticks) {
				t.Fatalf("schema -apply: exit %d; want the job table alone\n%s%s", code, out, errOut)
			}
			code, _, errOut := inboxRun(t, "schedules", "-dsn", l.dsn, "-table", name)
			if code != 1 || !strings.Contains(errOut, "CREATE TABLE "+ticks) {
				t.Fatalf("schedules without the ticks table: exit %d; want 1 and the statement that creates it\n%s", code, errOut)
			}
			quoted, _ := tg.dialect.Quote(name)
			if _, err := db.Exec("DROP TABLE " + quoted); err != nil {
				t.Fatal(err)
			}
			if code, out, errOut := inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-apply", "-schedules"); code != 0 || !strings.Contains(out, "CREATE TABLE "+ticks) {
				t.Fatalf("schema -apply -schedules: exit %d\n%s%s", code, out, errOut)
			}
			if code, out, errOut := inboxRun(t, "schedules", "-dsn", l.dsn, "-table", name); code != 0 || out != "no schedule has run on table "+name+"\n" {
				t.Fatalf("schedules of none: exit %d\n%s%s", code, out, errOut)
			}

			takeTicks(t, db, tg, name)
			checkListed(t, l, name)
		})
	}
}

// takeTicks runs a Periodic of a schedule of 100 ms, "report", on table name for 450 ms.
func takeTicks(t *testing.T, db *sql.DB, tg target, name string) {
	t.Helper()
	tbl := inbox.Table{Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers"}
	p := inbox.NewPeriodic(db, tg.dialect, tbl, nil)
	if err := p.Add(inbox.PeriodicJob{Name: "report", Schedule: inbox.Every(100 * time.Millisecond), Message: func(time.Time) inbox.Message { return inbox.Message{Payload: []byte("r")} }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkListed checks that inbox schedules lists "report" with its last tick, the next one
// 100 ms later and its last job, as JSON and as text.
func checkListed(t *testing.T, l liveDSN, name string) {
	t.Helper()
	code, out, errOut := inboxRun(t, "schedules", "-dsn", l.dsn, "-table", name, "-json")
	var got struct {
		Name     string
		LastTick *time.Time `json:"last_tick"`
		NextTick *time.Time `json:"next_tick"`
		JobID    int64      `json:"job_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("schedules -json: exit %d\n%s%s", code, out, errOut)
	}
	if got.Name != "report" || got.LastTick == nil || got.NextTick == nil || got.NextTick.Sub(*got.LastTick) != 100*time.Millisecond || got.JobID == 0 {
		t.Errorf("schedules -json = %s; want report, its last tick, the next 100 ms later, and its job", out)
	}
	code, out, _ = inboxRun(t, "schedules", "-dsn", l.dsn, "-table", name)
	if lines := strings.Split(out, "\n"); code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "schedule  last tick") || !strings.HasPrefix(lines[1], "report    "+got.LastTick.Format("2006-01-02 15:04:05.000")) {
		t.Errorf("schedules: exit %d\n%s", code, out)
	}
}
