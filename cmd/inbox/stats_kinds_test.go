package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestStatsByKind: with -kind-column, or a kind column found by its name, stats prints a line
// per kind under each queue's, and -json the kinds' counts under "kinds"; with -kind-column=,
// neither.
func TestStatsByKind(t *testing.T) {
	db, path := sqliteJobs(t)
	if _, err := db.Exec("ALTER TABLE jobs ADD COLUMN kind TEXT"); err != nil {
		t.Fatal(err)
	}
	ago := dialect.SQLite[isolation.Default]{}.Time(time.Now().Add(-2 * time.Minute))
	for _, kind := range []any{"mail", "mail", "report", nil} {
		if _, err := db.Exec("INSERT INTO jobs (queue, kind, retry_after) VALUES ('a', ?, ?)", kind, ago); err != nil {
			t.Fatal(err)
		}
	}

	code, out, errOut := inboxRun(t, "stats", "-dsn", path, "-kind-column", "kind")
	if code != 0 {
		t.Fatalf("stats: exit %d\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "kind") {
		t.Fatalf("stats -kind-column: want a head, a line for the queue and one per kind:\n%s", out)
	}
	for i, want := range [][]string{{"a", "(all)", "4"}, {"a", "(none)", "1"}, {"a", "mail", "2"}, {"a", "report", "1"}} {
		if f := strings.Fields(lines[i+1]); len(f) < 3 || f[0] != want[0] || f[1] != want[1] || f[2] != want[2] {
			t.Errorf("line %d %q, want queue %s, kind %s, due %s", i+1, lines[i+1], want[0], want[1], want[2])
		}
	}

	code, out, errOut = inboxRun(t, "stats", "-dsn", path, "-kind-column", "kind", "-json")
	if code != 0 {
		t.Fatalf("stats -json: exit %d\n%s", code, errOut)
	}
	var got struct {
		Due   int64 `json:"due"`
		Kinds []struct {
			Kind   string   `json:"kind"`
			Due    int64    `json:"due"`
			Oldest *float64 `json:"oldest_due_seconds"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Due != 4 || len(got.Kinds) != 3 || got.Kinds[1].Kind != "mail" || got.Kinds[1].Due != 2 || got.Kinds[1].Oldest == nil || *got.Kinds[1].Oldest < 110 {
		t.Errorf("stats -json: %s; want 4 due, and kinds (none), mail (2 due, two minutes) and report", out)
	}

	code, inferred, _ := inboxRun(t, "stats", "-dsn", path)
	_, named, _ := inboxRun(t, "stats", "-dsn", path, "-kind-column", "kind")
	if code != 0 || inferred != named {
		t.Errorf("stats without -kind-column: exit %d; want the kinds of the kind column, as with -kind-column kind:\n%s", code, inferred)
	}
	code, out, _ = inboxRun(t, "stats", "-dsn", path, "-kind-column=")
	if code != 0 || strings.Contains(out, "kind") || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Errorf("stats -kind-column=: want a head and a line, no kinds:\n%s", out)
	}
}
