package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRatesCommand: on a SQLite file, schema -apply -rates creates the rates table; rates -set
// set sets a queue's and a kind's rate, list lists them, set refuses a rate of 0 and a
// malformed one, and clear removes one.
func TestRatesCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-rates", "-kind-column", "kind"); code != 0 || !strings.Contains(out, "inbox_rates") {
		t.Fatalf("schema -apply -rates: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-queue", "a", "-rate", "100/1m"); code != 0 || out != "queue \"a\": at most 100 starts per 1m0s\n" {
		t.Fatalf("rates set -rate 100/1m: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-queue", "a", "-kind", "email", "-rate", "5/1s"); code != 0 || !strings.Contains(out, "at most 5 starts per 1s") {
		t.Fatalf("rates set -kind email -rate 5/1s: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := inboxRun(t, "rates", "list", "-dsn", path)
	if code != 0 || !strings.Contains(out, "queue \"a\"\t100 per 1m0s\t0 in the last 1m0s") || !strings.Contains(out, "queue \"a\" kind \"email\"\t5 per 1s") {
		t.Fatalf("rates list: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-queue", "a", "-rate", "0/1s"); code != 1 || !strings.Contains(errOut, "between 1 and") {
		t.Errorf("rates set -rate 0/1s: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-queue", "a", "-rate", "fast"); code != 2 {
		t.Errorf("rates set -rate fast: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "clear", "-dsn", path, "-queue", "a"); code != 0 || out != "queue \"a\": no rate\n" {
		t.Fatalf("rates clear: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "rates", "list", "-dsn", path); strings.Contains(out, "100 per") || !strings.Contains(out, "email") {
		t.Errorf("rates list after clear of the queue's:\n%s", out)
	}
}
