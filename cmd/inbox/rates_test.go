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

// TestRatesCommandPerKey: with the limit key column, rates set -key sets a key's rate beside
// the queue's, list prints it by its key, -kind with -key is a usage error, a key's rate
// without the column fails naming it, and clear -key removes the key's alone.
func TestRatesCommandPerKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-rates", "-kind-column", "kind", "-limit-key"); code != 0 || !strings.Contains(out, "inbox_rates") {
		t.Fatalf("schema -apply -rates -limit-key: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-queue", "a", "-key", "tenant-42", "-rate", "10/1m"); code != 0 || out != "queue \"a\" key \"tenant-42\": at most 10 starts per 1m0s\n" {
		t.Fatalf("rates set -key tenant-42 -rate 10/1m: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-queue", "a", "-rate", "100/1m"); code != 0 {
		t.Fatalf("rates set -rate 100/1m: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "list", "-dsn", path); code != 0 || !strings.Contains(out, "queue \"a\" key \"tenant-42\"\t10 per 1m0s\t0 in the last 1m0s") || !strings.Contains(out, "queue \"a\"\t100 per 1m0s") {
		t.Fatalf("rates list: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-queue", "a", "-kind", "email", "-key", "k", "-rate", "1/1s"); code != 2 || !strings.Contains(errOut, "one kind or of one key") {
		t.Errorf("rates set -kind -key: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := inboxRun(t, "rates", "set", "-dsn", path, "-limit-key=", "-queue", "a", "-key", "k", "-rate", "1/1s"); code != 1 || !strings.Contains(errOut, "inbox.Table.LimitKey") {
		t.Errorf("rates set -key without the limit key column: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := inboxRun(t, "rates", "clear", "-dsn", path, "-queue", "a", "-key", "tenant-42"); code != 0 || out != "queue \"a\" key \"tenant-42\": no rate\n" {
		t.Fatalf("rates clear -key: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "rates", "list", "-dsn", path); strings.Contains(out, "tenant-42") || !strings.Contains(out, "100 per") {
		t.Errorf("rates list after clear of the key's:\n%s", out)
	}
}
