package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsLeaveNoDatabaseFileBehind gives every command that needs a SQLite file one that
// does not exist, in a directory that exists and in one that does not: each says that there is
// no database file there, and none is left behind. The commands that create a table (schema
// -apply, the demo) say which directory is missing; schema with a DSN prints without
// connecting.
func TestCommandsLeaveNoDatabaseFileBehind(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "tpyo.db"), filepath.Join(dir, "nosuchdir", "app.db")} {
		for _, args := range [][]string{
			{"stats"},
			{"stats", "-json"},
			{"dead", "list"},
			{"schema", "-check"},
			{"dead", "requeue", "-all"},
			{"dead", "purge", "-ids", "1"},
			{"purge", "-processed-before", "7d"},
		} {
			code, out, errOut := inboxRun(t, append(args, "-dsn", path)...)
			want := "inbox " + args[0] + ": no database file at " + path + "\n"
			if code != 1 || errOut != want || out != "" {
				t.Errorf("inbox %s -dsn %s: exit %d, stdout %q, stderr %q; want 1 and %q", strings.Join(args, " "), path, code, out, errOut, want)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("inbox %s -dsn %s left a file behind (%v)", strings.Join(args, " "), path, err)
			}
		}
		code, out, errOut := inboxRun(t, "schema", "-dsn", path)
		if code != 0 || !strings.Contains(out, "CREATE TABLE") || errOut != "" {
			t.Errorf("inbox schema -dsn %s: exit %d\n%s%s", path, code, out, errOut)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("inbox schema -dsn %s, which prints, left a file behind (%v)", path, err)
		}
	}
	path := filepath.Join(dir, "nosuchdir", "app.db")
	for _, args := range [][]string{{"schema", "-apply"}, {"demo", "-n", "1"}} {
		code, out, errOut := inboxRun(t, append(args, "-dsn", path)...)
		want := "inbox " + args[0] + ": no directory " + filepath.Dir(path) + " for the database file " + path + ": create the directory first\n"
		if code != 1 || errOut != want {
			t.Errorf("inbox %s -dsn %s: exit %d, stdout %q, stderr %q; want 1 and %q", strings.Join(args, " "), path, code, out, errOut, want)
		}
	}
}

// TestReadingCommandsOpenSQLiteReadOnly checks that the commands that only read open the file
// read-only (a write through their connection fails), and that they read a database in the
// rollback journal mode without switching it to WAL, which a read-only connection cannot.
func TestReadingCommandsOpenSQLiteReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	tg, err := parseDSN("file:" + path + "?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	rw, err := open(ctx, tg, 1, createFile)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	code, ddl, errOut := inboxRun(t, "schema", "-db", "sqlite")
	if code != 0 {
		t.Fatalf("schema -db sqlite: exit %d\n%s", code, errOut)
	}
	if _, err := rw.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Exec("INSERT INTO jobs (payload) VALUES ('{}')"); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := rw.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "delete" {
		t.Fatalf("journal mode %q (%v); want delete", mode, err)
	}

	reader, err := parseDSN(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := open(ctx, reader, 1, readFile)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var n int
	if err := ro.QueryRow("SELECT COUNT(*) FROM jobs").Scan(&n); err != nil || n != 1 {
		t.Errorf("read-only: %d rows (%v); want 1", n, err)
	}
	if _, err := ro.Exec("INSERT INTO jobs (payload) VALUES ('{}')"); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("an INSERT through the read-only connection: %v; want it refused as read-only", err)
	}

	if code, out, errOut := inboxRun(t, "stats", "-dsn", path); code != 0 || !strings.Contains(out, `""`) {
		t.Errorf("stats of a database in the rollback journal mode: exit %d\n%s%s", code, out, errOut)
	}
	if err := rw.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "delete" {
		t.Errorf("after stats, journal mode %q (%v); want delete, as it was", mode, err)
	}
}
