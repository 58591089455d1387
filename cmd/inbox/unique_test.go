package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaUniqueKey: -unique-key adds the unique key column and its unique index to what
// schema prints (-unique-key=NAME names the column), -apply creates them, and a later command
// on that table infers the column's role (the -check finds the table as described).
func TestSchemaUniqueKey(t *testing.T) {
	if code, out, errOut := inboxRun(t, "schema", "-db", "mariadb", "-unique-key"); code != 0 ||
		!strings.Contains(out, "`unique_key` VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL") || !strings.Contains(out, "UNIQUE KEY `jobs_unique_key_key` (`unique_key`)") {
		t.Fatalf("schema -unique-key: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := inboxRun(t, "schema", "-db", "postgres", "-unique-key=dedupe"); code != 0 ||
		!strings.Contains(out, `CREATE UNIQUE INDEX "jobs_dedupe_key" ON "jobs" ("dedupe");`) {
		t.Fatalf("schema -unique-key=dedupe: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "schema", "-db", "mariadb"); strings.Contains(out, "unique_key") {
		t.Errorf("schema without -unique-key printed the column:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-unique-key"); code != 0 || !strings.Contains(out, "CREATE UNIQUE INDEX `jobs_unique_key_key`") {
		t.Fatalf("schema -apply -unique-key: exit %d\n%s%s", code, out, errOut)
	}
	db, _ := liveDB(t, liveDSN{"sqlite", path})
	if _, err := db.Exec("INSERT INTO jobs (unique_key) VALUES ('k')"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO jobs (unique_key) VALUES ('k')"); err == nil {
		t.Error("a second row of key k was inserted: the index is not unique")
	}
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-check", "-unique-key"); code != 0 {
		t.Errorf("schema -check -unique-key of the table it created: exit %d\n%s%s", code, out, errOut)
	}
}
