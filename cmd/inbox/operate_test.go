package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// inboxRun runs the command in the test's process with args, the environment empty, and
// returns its exit status and output.
func inboxRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

// liveTable opens l for the test's own statements and returns a table name of the test's own,
// quoted, dropped when the test ends.
func liveTable(t *testing.T, l liveDSN) (*sql.DB, target, string, string) {
	t.Helper()
	db, tg := liveDB(t, l)
	name := strings.Replace(tableName(t), "inbox_demo_", "inbox_ops_", 1)
	quoted, _ := tg.dialect.Quote(name)
	db.Exec("DROP TABLE IF EXISTS " + quoted)
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + quoted) })
	return db, tg, name, quoted
}

func TestSchemaApplyCheckAndEachDefect(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			db, _, name, quoted := liveTable(t, l)
			if code, out, errOut := inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-check"); code != 1 || !strings.Contains(out, "table "+name+": not found") {
				t.Fatalf("check of no table: exit %d\n%s%s", code, out, errOut)
			}
			// The table without its headers column and its claim index, and (but on SQLite, whose
			// columns take the library's text whatever their type) a lease column without microseconds.
			code, out, errOut := inboxRun(t, "schema", "-db", l.name, "-table", name, "-headers=")
			if code != 0 {
				t.Fatalf("schema: exit %d\n%s", code, errOut)
			}
			create, _, _ := strings.Cut(out, ";\n")
			create = regexp.MustCompile(",\n    INDEX [^\n]*").ReplaceAllString(create, "")
			if _, err := db.Exec(create); err != nil {
				t.Fatalf("%s: %v", create, err)
			}
			lossy := map[string]string{"postgres": `ALTER TABLE %s ALTER COLUMN "locked_until" TYPE TIMESTAMPTZ(0)`, "mysql": "ALTER TABLE %s MODIFY `locked_until` DATETIME NULL"}
			lossy["mariadb"] = lossy["mysql"]
			if alter, ok := lossy[l.name]; ok {
				if _, err := db.Exec(fmt.Sprintf(alter, quoted)); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut = inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-check")
			if code != 1 || !strings.Contains(errOut, "does not match its description") {
				t.Fatalf("check of the defective table: exit %d\n%s%s", code, out, errOut)
			}
			var fixes []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(line, "WRONG") {
					continue
				}
				fix := line[strings.LastIndex(line, ": ")+2:]
				fixes = append(fixes, fix)
			}
			want := []string{"column \"headers\" (Headers) is missing", "claim index ("}
			if _, ok := lossy[l.name]; ok {
				want = append(want, "column \"locked_until\" (lease column) is ")
			}
			for _, w := range want {
				if !strings.Contains(out, "WRONG "+w) {
					t.Errorf("the check does not say %q:\n%s", w, out)
				}
			}
			if len(fixes) != len(want) {
				t.Fatalf("%d problems reported, want %d:\n%s", len(fixes), len(want), out)
			}
			for _, fix := range fixes {
				if _, err := db.Exec(fix); err != nil {
					t.Fatalf("the fix %s: %v", fix, err)
				}
			}
			if code, out, errOut := inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-check"); code != 0 {
				t.Fatalf("check after the fixes: exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

func TestStatsDeadAndPurgeCommands(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			db, tg, name, quoted := liveTable(t, l)
			if code, out, errOut := inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-apply"); code != 0 || !strings.Contains(out, "created table "+name) {
				t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
			}
			d := tg.dialect
			p := func(n int) string { return d.Placeholder(n) }
			long := time.Now().Add(-30 * 24 * time.Hour)
			for _, r := range []struct {
				queue   string
				dead    any
				done    any
				lastErr any
			}{
				{"a", nil, nil, nil},
				{"a", d.Time(time.Now().Add(-time.Minute)), nil, "boom\nstack"},
				{"b", d.Time(time.Now().Add(-2 * time.Minute)), nil, "bad"},
				{"a", nil, d.Time(long), nil},
				{"a", nil, d.Time(time.Now()), nil},
			} {
				if _, err := db.Exec("INSERT INTO "+quoted+" (queue, attempt, dead_at, processed_at, last_error) VALUES ("+p(1)+", 2, "+p(2)+", "+p(3)+", "+p(4)+")", r.queue, r.dead, r.done, r.lastErr); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := inboxRun(t, "stats", "-dsn", l.dsn, "-table", name, "-json")
			if code != 0 {
				t.Fatalf("stats: exit %d\n%s", code, errOut)
			}
			var a, b jsonStats
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &a) != nil || json.Unmarshal([]byte(lines[1]), &b) != nil {
				t.Fatalf("stats -json: want a line per queue:\n%s", out)
			}
			if a.Queue != "a" || a.Due != 1 || a.Dead != 1 || a.Processed != 2 || a.InWork == nil || *a.InWork != 0 || a.OldestDue != nil || b.Dead != 1 {
				t.Errorf("stats -json:\n%s", out)
			}
			code, out, _ = inboxRun(t, "stats", "-dsn", l.dsn, "-table", name, "-lease=")
			if code != 0 || !strings.Contains(out, "unknown") {
				t.Errorf("stats without a lease column says nothing unknown:\n%s", out)
			}

			code, out, errOut = inboxRun(t, "dead", "list", "-dsn", l.dsn, "-table", name, "-limit", "1")
			if code != 0 || !strings.Contains(out, "boom stack") || !strings.Contains(out, "next page: -after ") {
				t.Fatalf("dead list: exit %d\n%s%s", code, out, errOut)
			}
			cursor := strings.TrimSpace(out[strings.Index(out, "-after ")+len("-after "):])
			code, out, _ = inboxRun(t, "dead", "list", "-dsn", l.dsn, "-table", name, "-after", cursor)
			if code != 0 || !strings.Contains(out, "bad") || strings.Contains(out, "boom") {
				t.Errorf("dead list -after %s:\n%s", cursor, out)
			}
			if code, out, _ := inboxRun(t, "dead", "requeue", "-dsn", l.dsn, "-table", name, "-queue", "b"); code != 0 || out != "requeued 1 dead rows of queue \"b\" (attempts reset to 0)\n" {
				t.Errorf("dead requeue -queue b: exit %d\n%s", code, out)
			}
			if code, out, _ := inboxRun(t, "dead", "purge", "-dsn", l.dsn, "-table", name, "-all"); code != 0 || out != "purged 1 dead rows of every queue\n" {
				t.Errorf("dead purge -all: exit %d\n%s", code, out)
			}
			if code, out, _ := inboxRun(t, "purge", "-dsn", l.dsn, "-table", name, "-processed-before", "7d"); code != 0 || !strings.HasPrefix(out, "purged 1 rows of every queue processed before ") {
				t.Errorf("purge -processed-before 7d: exit %d\n%s", code, out)
			}
			var left int
			if err := db.QueryRow("SELECT COUNT(*) FROM " + quoted).Scan(&left); err != nil || left != 3 {
				t.Errorf("%d rows left (%v), want 3", left, err)
			}
		})
	}
}

func TestOperatingCommandsRefuseBadCommandLines(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"schema"}, "or -db to print for one"},
		{[]string{"schema", "-db", "oracle"}, "name postgres, mysql, mariadb or sqlite"},
		{[]string{"schema", "-db", "sqlite", "-id="}, "set inbox.Table.ID"},
		{[]string{"dead", "requeue", "-dsn", "x.db"}, "give -ids, -queue or -all"},
		{[]string{"dead", "purge", "-dsn", "x.db", "-all", "-queue", "a"}, "give one"},
		{[]string{"dead", "requeue", "-dsn", "x.db", "-ids", "1,x"}, "write ids as 1,2,3"},
		{[]string{"dead", "list", "-dsn", "x.db", "-after", "yesterday"}, "dead_at/id"},
		{[]string{"dead", "bury"}, `dead "bury"`},
		{[]string{"purge", "-dsn", "x.db"}, "-processed-before: give the age"},
		{[]string{"purge", "-dsn", "x.db", "-processed-before", "a week"}, "a number of days"},
		{[]string{"stats"}, "no database"},
		{[]string{"stats", "-dsn", "postgres://u:s3cret@127.0.0.1:1/x", "-table", ""}, "no Name"},
	} {
		code, out, errOut := inboxRun(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Contains(out+errOut, "s3cret") {
			t.Errorf("inbox %s: exit %d, want 2 and %q\n%s%s", strings.Join(c.args, " "), code, c.want, out, errOut)
		}
	}
}
