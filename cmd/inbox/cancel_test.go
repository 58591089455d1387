package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCancelCommand: schema -cancels -cancelled-at creates the table with its cancelled_at
// column and inbox_cancels; cancel -ids cancels a queued row, says which rows it left (a
// processed one, a missing one) and exits with 1; stats, show and rows -state cancelled show the
// cancelled row (the column inferred by its name), and cancel -requeue puts it back.
func TestCancelCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-cancels", "-cancelled-at", "cancelled_at"); code != 0 ||
		!strings.Contains(out, "cancelled_at") || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS inbox_cancels") {
		t.Fatalf("schema -apply -cancels: exit %d\n%s%s", code, out, errOut)
	}
	db, _ := liveDB(t, liveDSN{"sqlite", path})
	if _, err := db.Exec("INSERT INTO jobs (queue) VALUES ('a'), ('a')"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE jobs SET processed_at = ? WHERE id = 2", sqliteTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := inboxRun(t, "cancel", "-dsn", path, "-ids", "1,2,9")
	if code != 1 || out != "row 1: cancelled\nrow 2: already processed\nrow 9: not found\n" || !strings.Contains(errOut, "2 of 3 rows were not cancelled") {
		t.Fatalf("cancel -ids 1,2,9: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "stats", "-dsn", path); code != 0 || !strings.Contains(out, "cancelled") || !strings.Contains(out, "a    0        0        0         0     0          1          1") {
		t.Errorf("stats: exit %d; want a cancelled column counting 1\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "show", "-dsn", path, "1"); code != 0 || !strings.Contains(out, "cancelled") || !strings.Contains(out, "cancelled at") {
		t.Errorf("show 1: exit %d; want the row cancelled, with its time\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "rows", "-dsn", path, "-state", "cancelled"); code != 0 || !strings.Contains(out, "\n1 ") || strings.Contains(out, "\n2 ") {
		t.Errorf("rows -state cancelled: exit %d; want row 1 alone\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "cancel", "-dsn", path, "-requeue", "-ids", "1,2"); code != 0 || out != "requeued 1 of 2 rows (the others were not cancelled)\n" {
		t.Fatalf("cancel -requeue: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "stats", "-dsn", path, "-json"); code != 0 || !strings.Contains(out, `"due":1,`) || !strings.Contains(out, `"cancelled":0`) {
		t.Errorf("stats -json after the requeue: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "cancel", "-dsn", path); code != 2 || !strings.Contains(errOut, "give -ids") {
		t.Errorf("cancel without -ids: exit %d, %q; want 2", code, errOut)
	}
}
