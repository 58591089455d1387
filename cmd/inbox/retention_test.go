package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaRetention: -retention adds the sweeper leases' table to what schema prints and to
// what -apply creates, and -apply -retention runs again on a database that has it.
func TestSchemaRetention(t *testing.T) {
	const create = "CREATE TABLE IF NOT EXISTS inbox_sweeps ("
	if code, out, errOut := inboxRun(t, "schema", "-db", "mariadb", "-retention"); code != 0 || !strings.HasSuffix(out, create+"table_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin PRIMARY KEY, holder VARCHAR(191) NOT NULL, locked_until DATETIME(6) NOT NULL);\n") {
		t.Fatalf("schema -retention: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "schema", "-db", "mariadb"); strings.Contains(out, "inbox_sweeps") {
		t.Errorf("schema without -retention printed the sweeper leases' table:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply", "-retention"); code != 0 || !strings.Contains(out, create) {
		t.Fatalf("schema -apply -retention: exit %d\n%s%s", code, out, errOut)
	}
	db, _ := liveDB(t, liveDSN{"sqlite", path})
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM inbox_sweeps").Scan(&n); err != nil || n != 0 {
		t.Fatalf("inbox_sweeps after -apply: %d rows, %v", n, err)
	}
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-table", "other", "-apply", "-retention"); code != 0 {
		t.Fatalf("schema -apply -retention for a second table: exit %d\n%s%s", code, out, errOut)
	}
}
