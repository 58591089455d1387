package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRatesCommand: on a SQLite file, schema -apply -rates creates the rates table; rates -set
// sets a queue's and a kind's rate, lists them, refuses a rate of 0 and a malformed one, and
// -clear removes one.
func TestRatesCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-rates", "-kind-column", "kind"); code != 0 || !strings.Contains(out, "inbox_rates") {
		t.Fatalf("schema -apply -rates: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "-dsn", path, "-queue", "a", "-set", "100/1m"); code != 0 || out != "queue \"a\": at most 100 starts per 1m0s\n" {
		t.Fatalf("rates -set 100/1m: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "-dsn", path, "-queue", "a", "-kind", "email", "-set", "5/1s"); code != 0 || !strings.Contains(out, "at most 5 starts per 1s") {
		t.Fatalf("rates -kind email -set 5/1s: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := inboxRun(t, "rates", "-dsn", path)
	if code != 0 || !strings.Contains(out, "queue \"a\"\t100 per 1m0s\t0 in the last 1m0s") || !strings.Contains(out, "queue \"a\" kind \"email\"\t5 per 1s") {
		t.Fatalf("rates: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "rates", "-dsn", path, "-queue", "a", "-set", "0/1s"); code != 1 || !strings.Contains(errOut, "between 1 and") {
		t.Errorf("rates -set 0/1s: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := inboxRun(t, "rates", "-dsn", path, "-queue", "a", "-set", "fast"); code != 2 {
		t.Errorf("rates -set fast: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "-dsn", path, "-queue", "a", "-clear"); code != 0 || out != "queue \"a\": no rate\n" {
		t.Fatalf("rates -clear: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "rates", "-dsn", path); strings.Contains(out, "100 per") || !strings.Contains(out, "email") {
		t.Errorf("rates after -clear of the queue's:\n%s", out)
	}
}
