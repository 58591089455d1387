package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaGroup: -group-key adds the FIFO group column, its index and the group holds' table to
// what schema prints (-group-key=NAME names the column), -apply creates them, and a later command
// on that table infers the column's role (the -check finds the table as described).
func TestSchemaGroup(t *testing.T) {
	if code, out, errOut := inboxRun(t, "schema", "-db", "mariadb", "-group-key"); code != 0 ||
		!strings.Contains(out, "`group_key` VARCHAR(191) NULL") ||
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
