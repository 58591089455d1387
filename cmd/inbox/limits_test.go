package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaLimits: -limits adds the limits' tables to what schema prints, and -limit-key the
// limit key column.
func TestSchemaLimits(t *testing.T) {
	code, out, errOut := inboxRun(t, "schema", "-db", "postgres", "-limits", "-limit-key")
	if code != 0 || !strings.Contains(out, `CREATE TABLE IF NOT EXISTS "inbox_limits"`) || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS inbox_slots") ||
		!strings.Contains(out, `"limit_key" VARCHAR(191)`) {
		t.Fatalf("schema -limits -limit-key: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "schema", "-db", "postgres"); strings.Contains(out, "inbox_limits") || strings.Contains(out, "limit_key") {
		t.Errorf("schema without -limits printed the limits' tables:\n%s", out)
	}
}

// TestLimitsCommand: on a SQLite file, limits needs the limits' tables and says how to create
// them; with them, set writes a queue's, a kind's and a key's limit (set again: replaced), list
// prints them (and -json), a limit of 0 and -kind with -key are refused as usage errors, and
// clear removes one.
func TestLimitsCommand(t *testing.T) {
	bare := filepath.Join(t.TempDir(), "bare.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", bare, "-apply"); code != 0 {
		t.Fatalf("schema -apply: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "limits", "set", "-dsn", bare, "-queue", "a", "-max", "2"); code != 1 || !strings.Contains(errOut, "inbox schema -limits -apply") {
		t.Fatalf("limits set without the limits' tables: exit %d; want 1 and how to create them\n%s", code, errOut)
	}

	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-limits", "-kind-column=kind", "-limit-key"); code != 0 || !strings.Contains(out, "inbox_slots") {
		t.Fatalf("schema -apply -limits: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		out  string
	}{
		{[]string{"-queue", "a", "-max", "5"}, `queue "a" of table jobs: at most 5 in work at once`},
		{[]string{"-queue", "a", "-max", "3"}, `queue "a" of table jobs: at most 3 in work at once`},
		{[]string{"-queue", "a", "-kind", "email", "-max", "2"}, `queue "a" of table jobs, kind "email": at most 2 in work at once`},
		{[]string{"-queue", "a", "-key", "tenant-42", "-max", "1"}, `queue "a" of table jobs, key "tenant-42": at most 1 in work at once`},
	} {
		if code, out, errOut := inboxRun(t, append([]string{"limits", "set", "-dsn", path}, c.args...)...); code != 0 || out != c.out+"\n" {
			t.Fatalf("limits set %v: exit %d\n%s%s", c.args, code, out, errOut)
		}
	}
	if code, _, errOut := inboxRun(t, "limits", "set", "-dsn", path, "-queue", "a", "-max", "0"); code != 2 || !strings.Contains(errOut, "give 1 or more") {
		t.Errorf("limits set -max 0: exit %d; want 2\n%s", code, errOut)
	}
	if code, _, errOut := inboxRun(t, "limits", "set", "-dsn", path, "-queue", "a", "-kind", "x", "-key", "y", "-max", "1"); code != 2 {
		t.Errorf("limits set -kind -key: exit %d; want 2\n%s", code, errOut)
	}
	code, out, errOut := inboxRun(t, "limits", "list", "-dsn", path)
	if code != 0 || !strings.Contains(out, "a      queue             3    0") || !strings.Contains(out, "kind   email      2") || !strings.Contains(out, "key    tenant-42  1") {
		t.Fatalf("limits list: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "limits", "clear", "-dsn", path, "-queue", "a", "-kind", "email"); code != 0 || out != `queue "a" of table jobs, kind "email": no limit`+"\n" {
		t.Fatalf("limits clear: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = inboxRun(t, "limits", "list", "-dsn", path, "-json")
	var scopes []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l struct {
			Queue, Scope, Key string
			Max               int
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("limits list -json: %v\n%s", err, out)
		}
		scopes = append(scopes, l.Scope+":"+l.Key)
	}
	if code != 0 || strings.Join(scopes, " ") != "key:tenant-42 queue:" {
		t.Fatalf("limits list -json after clear: exit %d, %v\n%s%s", code, scopes, out, errOut)
	}
}
