package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// TestSchemaGroup: -group-key adds the FIFO group column, its index and the group holds' table to
// what schema prints (-group-key=NAME names the column), -apply creates them, and a later command
// on that table infers the column's role (the -check finds the table as described).
func TestSchemaGroup(t *testing.T) {
	if code, out, errOut := inboxRun(t, "schema", "-db", "mariadb", "-group-key"); code != 0 ||
		!strings.Contains(out, "`group_key` VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL") ||
		!strings.Contains(out, "CREATE INDEX `jobs_group` ON `jobs` (`queue`, `group_key`, `processed_at`, `dead_at`, `id`);") ||
		!strings.Contains(out, "CREATE TABLE IF NOT EXISTS inbox_groups (") {
		t.Fatalf("schema -group-key: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "schema", "-db", "postgres", "-group-key=customer"); code != 0 ||
		!strings.Contains(out, `"customer" VARCHAR(191)`) || !strings.Contains(out, `("queue", "customer", "id") WHERE "processed_at" IS NULL AND "dead_at" IS NULL`) {
		t.Fatalf("schema -group-key=customer: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "schema", "-db", "mariadb"); strings.Contains(out, "group_key") || strings.Contains(out, "inbox_groups") {
		t.Errorf("schema without -group-key printed the column or the holds' table:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-group-key"); code != 0 || !strings.Contains(out, "inbox_groups") {
		t.Fatalf("schema -apply -group-key: exit %d\n%s%s", code, out, errOut)
	}
	db, _ := liveDB(t, liveDSN{"sqlite", path})
	if _, err := db.Exec("SELECT table_name, queue, group_key, holder_id, holder_token FROM inbox_groups"); err != nil {
		t.Errorf("the holds' table -apply created: %v", err)
	}
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-check"); code != 0 {
		t.Errorf("schema -check (the group column inferred) of the table it created: exit %d\n%s%s", code, out, errOut)
	}
}

// TestGroupsCommandChangesAGroup: on a SQLite file, a consumer that keeps groups blocked lets
// the head of group a die in work; inbox groups -blocked lists a as blocked by its dead head,
// groups unblock lets it go on (a second says nothing changed), and groups pause and resume
// mark group b paused and clear the mark.
func TestGroupsCommandChangesAGroup(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-group-key"); code != 0 {
		t.Fatalf("schema -apply -group-key: exit %d\n%s%s", code, out, errOut)
	}
	db, tg := liveDB(t, liveDSN{"sqlite", path})
	tbl := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", ProcessedAt: "processed_at", Queue: "queue",
		Priority: "priority", RetryAfter: "retry_after", Headers: "headers", DeadAt: "dead_at", LastError: "last_error", GroupKey: "group_key", LockedUntil: "locked_until"}
	if err := inbox.Enqueue(ctx, db, tg.dialect, tbl, inbox.Message{Queue: "q", GroupKey: "a"}, inbox.Message{Queue: "q", GroupKey: "a"}, inbox.Message{Queue: "q", GroupKey: "b"}); err != nil {
		t.Fatal(err)
	}
	f := lease.New(tg.dialect, tbl, &lease.Config{GroupsStayBlocked: true})
	if _, err := f.Open(ctx, db, inbox.Binding{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ds, err := f.Claim(ctx, 1)
	if err != nil || len(ds) != 1 || ds[0].ID != 1 {
		t.Fatalf("Claim: %v, %v; want row 1", ds, err)
	}
	if err := f.Settle(ctx, ds[0], outcome.Fail(errors.New("permanent"))); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := inboxRun(t, "groups", "-dsn", path, "-blocked"); code != 0 || !strings.Contains(out, "its head 1 died in work") || strings.Contains(out, "\nq      b") {
		t.Fatalf("groups -blocked: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := inboxRun(t, "groups", "unblock", "-dsn", path, "-queue", "q"); code != 2 || !strings.Contains(errOut, "-group") {
		t.Fatalf("groups unblock without -group: exit %d; want 2\n%s", code, errOut)
	}
	want := `group "a" of queue "q" of table jobs goes on past its dead head 1, which stays dead (inbox dead requeue -ids 1 runs it again)` + "\n"
	if code, out, errOut := inboxRun(t, "groups", "unblock", "-dsn", path, "-queue", "q", "-group", "a"); code != 0 || out != want {
		t.Fatalf("groups unblock: exit %d\n%s%s", code, out, errOut)
	}
	want = `group "a" of queue "q" of table jobs is not blocked by a dead head: nothing changed` + "\n"
	if code, out, errOut := inboxRun(t, "groups", "unblock", "-dsn", path, "-queue", "q", "-group", "a"); code != 0 || out != want {
		t.Fatalf("a second groups unblock: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "groups", "pause", "-dsn", path, "-queue", "q", "-group", "b"); code != 0 || !strings.Contains(out, `group "b" of queue "q" of table jobs is paused`) {
		t.Fatalf("groups pause: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "groups", "-dsn", path); code != 0 || !strings.Contains(out, "paused since") || strings.Contains(out, "died in work") {
		t.Fatalf("groups after the unblock and the pause: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "groups", "resume", "-dsn", path, "-queue", "q", "-group", "b"); code != 0 || out != `group "b" of queue "q" of table jobs is resumed`+"\n" {
		t.Fatalf("groups resume: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "groups", "-dsn", path); strings.Contains(out, "paused since") {
		t.Errorf("groups after the resume:\n%s", out)
	}
}
