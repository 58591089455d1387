package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
)

// TestSchemaPauses: -pauses adds the table of paused queues to what schema prints.
func TestSchemaPauses(t *testing.T) {
	const create = "CREATE TABLE IF NOT EXISTS \"inbox_pauses\" (table_name TEXT NOT NULL, queue_name TEXT NOT NULL, paused_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (table_name, queue_name));\n"
	if code, out, errOut := inboxRun(t, "schema", "-db", "postgres", "-pauses"); code != 0 || !strings.HasSuffix(out, create) {
		t.Fatalf("schema -pauses: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "schema", "-db", "postgres"); strings.Contains(out, "inbox_pauses") {
		t.Errorf("schema without -pauses printed the table of paused queues:\n%s", out)
	}
}

// TestPauseCommand: on a SQLite file, pause and resume need the table of paused queues and
// say how to create it; with it, pause marks queue a paused (twice: idempotent) and a queue no
// row names, stats prints "(paused)" by both and -json says so, and resume clears a's mark.
func TestPauseCommand(t *testing.T) {
	bare := filepath.Join(t.TempDir(), "bare.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", bare, "-apply"); code != 0 {
		t.Fatalf("schema -apply: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "pause", "-dsn", bare, "-queue", "a"); code != 1 || !strings.Contains(errOut, "inbox schema -pauses -apply") {
		t.Fatalf("pause without the pauses table: exit %d; want 1 and how to create it\n%s", code, errOut)
	}

	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-pauses"); code != 0 || !strings.Contains(out, "inbox_pauses") {
		t.Fatalf("schema -apply -pauses: exit %d\n%s%s", code, out, errOut)
	}
	db, tg := liveDB(t, liveDSN{"sqlite", path})
	tbl := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers"}
	if err := inbox.Enqueue(context.Background(), db, tg.dialect, tbl, inbox.Message{Queue: "a"}, inbox.Message{Queue: "b"}); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := inboxRun(t, "pause", "-dsn", path); code != 2 || !strings.Contains(errOut, "-queue") {
		t.Fatalf("pause without -queue: exit %d; want 2\n%s", code, errOut)
	}
	for _, q := range []string{"a", "a", "c"} {
		if code, out, errOut := inboxRun(t, "pause", "-dsn", path, "-queue", q); code != 0 || out != `queue "`+q+`" of table jobs is paused: no claim takes its rows until inbox resume; the rows in work finish`+"\n" {
			t.Fatalf("pause -queue %s: exit %d\n%s%s", q, code, out, errOut)
		}
	}
	code, out, errOut := inboxRun(t, "stats", "-dsn", path)
	if code != 0 || !strings.Contains(out, "a (paused)") || !strings.Contains(out, "c (paused)") || strings.Contains(out, "b (paused)") {
		t.Fatalf("stats with a and c paused: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = inboxRun(t, "stats", "-dsn", path, "-json")
	paused := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s struct {
			Queue  string
			Paused bool
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("stats -json: %v\n%s", err, out)
		}
		paused[s.Queue] = s.Paused
	}
	if code != 0 || len(paused) != 3 || !paused["a"] || paused["b"] || !paused["c"] {
		t.Fatalf("stats -json with a and c paused: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "resume", "-dsn", path, "-queue", "a"); code != 0 || out != `queue "a" of table jobs is resumed`+"\n" {
		t.Fatalf("resume -queue a: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "stats", "-dsn", path); strings.Contains(out, "a (paused)") || !strings.Contains(out, "c (paused)") {
		t.Errorf("stats after resume -queue a:\n%s", out)
	}
}
