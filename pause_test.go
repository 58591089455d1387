package inbox

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/isolation"
)

// scriptedClient is a client of table jobs (a queue column, the pauses table inbox_pauses) on d
// over a database scripted with steps.
func scriptedClient[D dialect.Dialect](t *testing.T, d D, steps []step, notify bool) (*Client[D], *script) {
	t.Helper()
	s := &script{steps: steps}
	db := sql.OpenDB(s)
	t.Cleanup(func() { db.Close() })
	c, err := NewClient(db, d, Table{Name: "jobs", ID: "id", Queue: "queue", Pauses: PausesTable, Notify: notify})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// TestPauseStatements: Pause and Resume run one statement each over the pauses table, keyed
// by the table's name and the queue; Resume notifies the table's channel in it on Postgres
// where the description asks for notifications, and wakes this process's consumers of the
// table.
func TestPauseStatements(t *testing.T) {
	ctx := context.Background()
	pg := dialect.Postgres[isolation.Default]{}
	w := sqltext.New(pg.Caps(), sqltext.Table{Name: `"jobs"`, ID: `"id"`, Queue: `"queue"`, Pauses: `"inbox_pauses"`}).Pauses()
	c, s := scriptedClient(t, pg, []step{
		{sql: w.Pause().SQL, args: []any{"jobs", "emails"}, rows: 1},
		{sql: w.ResumeNotifying().SQL, args: []any{"jobs", "emails", "inbox.jobs"}, rows: 1},
	}, true)
	woken := make(chan struct{}, 1)
	defer listen("jobs", woken)()
	if err := c.Pause(ctx, "emails"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
		t.Error("Pause woke the table's consumers")
	default:
	}
	if err := c.Resume(ctx, "emails"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	default:
		t.Error("Resume did not wake the table's consumers")
	}
	if len(s.bad) > 0 || len(s.steps) > 0 {
		t.Errorf("statements out of sequence: %v; left: %v", s.bad, s.steps)
	}

	my := dialect.MySQL[isolation.Default]{}
	mw := sqltext.New(my.Caps(), sqltext.Table{Name: "`jobs`", ID: "`id`", Queue: "`queue`", Pauses: "`inbox_pauses`"}).Pauses()
	c2, s2 := scriptedClient(t, my, []step{{sql: mw.Resume().SQL, args: []any{"jobs", "emails"}}}, true)
	if err := c2.Resume(ctx, "emails"); err != nil {
		t.Fatal(err)
	}
	if len(s2.bad) > 0 || len(s2.steps) > 0 {
		t.Errorf("MySQL's Resume: statements out of sequence: %v; left: %v", s2.bad, s2.steps)
	}
}

// TestPauseRefusals: without a pauses table in the description, Pause, Resume and Paused
// fail with ErrSchema naming the field, and run nothing; a queue named on a table without a
// queue column is refused; a pauses table that the database refuses to read is ErrSchema with
// the statement that creates it; a description whose pauses table is the job table is refused.
func TestPauseRefusals(t *testing.T) {
	ctx := context.Background()
	pg := dialect.Postgres[isolation.Default]{}
	s := &script{}
	db := sql.OpenDB(s)
	defer db.Close()
	c, err := NewClient(db, pg, Table{Name: "jobs", ID: "id", Queue: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Pause":  func() error { return c.Pause(ctx, "a") },
		"Resume": func() error { return c.Resume(ctx, "a") },
		"Paused": func() error { _, err := c.Paused(ctx); return err },
	} {
		if err := call(); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "inbox.Table.Pauses") {
			t.Errorf("%s without a pauses table: %v, want ErrSchema naming inbox.Table.Pauses", name, err)
		}
	}
	one, err := NewClient(db, pg, Table{Name: "jobs", ID: "id", Pauses: PausesTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Pause(ctx, "a"); err == nil || !strings.Contains(err.Error(), "no Queue column") {
		t.Errorf("Pause of a named queue on a table without a queue column: %v", err)
	}
	if len(s.bad) > 0 {
		t.Errorf("a refused call ran statements: %v", s.bad)
	}

	w := sqltext.New(pg.Caps(), sqltext.Table{Name: `"jobs"`, ID: `"id"`, Queue: `"queue"`, Pauses: `"inbox_pauses"`}).Pauses()
	missing := errors.New(`relation "inbox_pauses" does not exist`)
	c3, s3 := scriptedClient(t, pg, []step{{sql: w.Pause().SQL, err: missing}, {sql: w.Check().SQL, err: missing}}, false)
	if err := c3.Pause(ctx, "a"); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), w.Create()) {
		t.Errorf("Pause with the pauses table missing: %v, want ErrSchema naming %s", err, w.Create())
	}
	if len(s3.bad) > 0 {
		t.Errorf("statements out of sequence: %v", s3.bad)
	}

	if err := (Table{Name: "jobs", ID: "id", Pauses: "jobs"}).Validate(); !errors.Is(err, ErrSchema) {
		t.Errorf("Validate of a pauses table named as the job table: %v, want ErrSchema", err)
	}
}
