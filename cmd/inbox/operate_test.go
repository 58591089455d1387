package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/isolation"
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
			_, creates, _ := inboxRun(t, "schema", "-db", l.name, "-table", name)
			code, out, errOut := inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-check")
			if code != 1 || !strings.Contains(out, "table "+name+" does not exist in ") || !strings.HasSuffix(out, ":\n"+creates) || strings.Contains(out, "WRONG") ||
				!strings.HasPrefix(errOut, "inbox schema: table \""+name+"\" does not exist in ") || !strings.HasSuffix(errOut, ": create it with the statements above\n") {
				t.Fatalf("check of no table: exit %d; want 1, the table said missing and the statements that create it:\n%s\n%s%s", code, creates, out, errOut)
			}
			// The table without its headers column and its claim index, and (but on SQLite, whose
			// columns take the library's text whatever their type) a lease column without
			// microseconds; on MySQL and MariaDB a queue of the default collation, which ignores
			// case and trailing spaces.
			code, out, errOut = inboxRun(t, "schema", "-db", l.name, "-table", name, "-headers=")
			if code != 0 {
				t.Fatalf("schema: exit %d\n%s", code, errOut)
			}
			create, _, _ := strings.Cut(out, ";\n")
			create = regexp.MustCompile(",\n    INDEX [^\n]*").ReplaceAllString(create, "")
			create = strings.ReplaceAll(strings.ReplaceAll(create, " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin", ""), "VARBINARY(764)", "VARCHAR(191)")
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
			if l.name == "mysql" || l.name == "mariadb" {
				want = append(want, "column \"queue\" (Queue) is varchar(191), of collation ")
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

// sqliteJobs is a SQLite file holding the README's table, jobs, for a test, and the table's
// name quoted.
func sqliteJobs(t *testing.T) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-apply"); code != 0 {
		t.Fatalf("schema -apply: exit %d\n%s%s", code, out, errOut)
	}
	db, _ := liveDB(t, liveDSN{"sqlite", path})
	return db, path
}

// TestErrorsCarryOneInboxPrefix checks that an error the library wrote ("inbox: table …") is
// printed after the command's name alone: "inbox stats: table …".
func TestErrorsCarryOneInboxPrefix(t *testing.T) {
	_, path := sqliteJobs(t)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"stats", "-table", "nosuch"}, 1, `inbox stats: table "nosuch" does not exist: create it with inbox schema -apply`},
		{[]string{"dead", "list", "-table", "nosuch"}, 1, `inbox dead: table "nosuch" does not exist: create it with inbox schema -apply`},
		{[]string{"dead", "list", "-dead-at="}, 1, `inbox dead: schema: table "jobs": Dead needs the DeadAt role`},
		{[]string{"dead", "requeue", "-queue", "a", "-queue-column="}, 1, `inbox dead: table "jobs": Requeue of queue "a": the description has no Queue column`},
		{[]string{"stats", "-table", ""}, 2, "inbox stats: schema: the table description has no Name"},
	} {
		code, out, errOut := inboxRun(t, append(c.args, "-dsn", path)...)
		if code != c.code || !strings.HasPrefix(errOut, c.says) || strings.Contains(errOut, "inbox: ") {
			t.Errorf("inbox %s: exit %d, stderr %q; want %d and %q, with one inbox prefix\n%s", strings.Join(c.args, " "), code, errOut, c.code, c.says, out)
		}
	}
}

// TestStatsJSONNamesItsFieldsAsAdminStatsDo checks that stats -json and admin.Stats's JSON
// name each count, and the oldest due row's wait, alike, and give the wait in seconds.
func TestStatsJSONNamesItsFieldsAsAdminStatsDo(t *testing.T) {
	keys := func(line []byte) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return m
	}
	b, err := json.Marshal(admin.Stats{Queue: "a", Due: 1, OldestDue: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lib := keys(b)
	if lib["oldest_due_seconds"] != 90.0 {
		t.Errorf("admin.Stats as JSON: %s; want oldest_due_seconds 90", b)
	}
	var back admin.Stats
	if err := json.Unmarshal(b, &back); err != nil || back.OldestDue != 90*time.Second || back.Due != 1 {
		t.Errorf("admin.Stats from %s: %+v (%v); want it as it was written", b, back, err)
	}

	db, path := sqliteJobs(t)
	if _, err := db.Exec("INSERT INTO jobs (queue, attempt, retry_after) VALUES ('a', 1, ?)", dialect.SQLite[isolation.Default]{}.Time(time.Now().Add(-time.Minute))); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := inboxRun(t, "stats", "-dsn", path, "-json")
	if code != 0 {
		t.Fatalf("stats -json: exit %d\n%s", code, errOut)
	}
	cli := keys([]byte(out))
	for k := range lib {
		if _, ok := cli[k]; !ok {
			t.Errorf("stats -json lacks admin.Stats's %q:\n%s", k, out)
		}
	}
	for k := range cli {
		if _, ok := lib[k]; !ok && k != "at" {
			t.Errorf("stats -json has %q, which admin.Stats's JSON does not:\n%s", k, out)
		}
	}
	if wait, ok := cli["oldest_due_seconds"].(float64); !ok || wait < 60 || wait > 3600 {
		t.Errorf("stats -json: oldest_due_seconds %v; want the minute and more the row has been due", cli["oldest_due_seconds"])
	}
}

// TestStatsWatchIntoAPipe runs stats -watch with its output into a pipe: it prints snapshots
// as plain text, one after the other, without the terminal's codes that redraw in place.
func TestStatsWatchIntoAPipe(t *testing.T) {
	_, path := sqliteJobs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, built(t), "stats", "-dsn", path, "-watch", "50ms")
	cmd.Env = withoutDSN(os.Environ())
	var stdout inboxtest.Log
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for strings.Count(stdout.String(), "(no rows)") < 3 {
		if ctx.Err() != nil {
			t.Fatalf("stats -watch printed no three snapshots:\n%q", stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stats -watch, interrupted: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	if strings.Contains(out, "\x1b") {
		t.Errorf("stats -watch wrote terminal codes into a pipe:\n%q", out)
	}
	snapshot := regexp.MustCompile(`^table jobs, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(every 50ms\)\n *queue +due +delayed +in work +retrying +dead +processed +oldest due *\n\(no rows\)\n$`)
	for i, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n\n") {
		if !snapshot.MatchString(s + "\n") {
			t.Errorf("snapshot %d, apart from the others by a blank line, is not the plain table:\n%q", i, s)
		}
	}
}

// TestDeadCommandsSayWhichIDsTheyTook checks that requeue and purge by -ids say which of the ids
// they requeued or purged, and which they skipped and why (not dead, not found), in text and
// in JSON; that dead list -json gives each row's cursor; and that -dry-run purges nothing and
// says what it would purge.
func TestDeadCommandsSayWhichIDsTheyTook(t *testing.T) {
	for _, l := range liveDSNs(t) {
		t.Run(l.name, func(t *testing.T) {
			db, tg, name, quoted := liveTable(t, l)
			if code, out, errOut := inboxRun(t, "schema", "-dsn", l.dsn, "-table", name, "-apply"); code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
			}
			d := tg.dialect
			p := func(n int) string { return d.Placeholder(n) }
			for i, dead := range []any{d.Time(time.Now().Add(-time.Minute)), nil, d.Time(time.Now().Add(-2 * time.Minute)), d.Time(time.Now().Add(-3 * time.Minute))} {
				var processed any
				if dead == nil {
					processed = d.Time(time.Now().Add(-30 * 24 * time.Hour))
				}
				if _, err := db.Exec("INSERT INTO "+quoted+" (id, queue, attempt, dead_at, processed_at) VALUES ("+p(1)+", 'a', 3, "+p(2)+", "+p(3)+")", i+1, dead, processed); err != nil {
					t.Fatal(err)
				}
			}
			// Rows 1, 3 and 4 are dead; 2 is processed a month ago; 99 does not exist.
			dsn := []string{"-dsn", l.dsn, "-table", name}
			count := func() (n int) {
				t.Helper()
				if err := db.QueryRow("SELECT COUNT(*) FROM " + quoted).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}

			code, out, errOut := inboxRun(t, append([]string{"dead", "list", "-json", "-limit", "2"}, dsn...)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var first, second struct {
				ID     int64  `json:"id"`
				Cursor string `json:"cursor"`
			}
			if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil || first.ID != 1 || second.ID != 3 || second.Cursor == "" {
				t.Fatalf("dead list -json -limit 2: exit %d; want rows 1 and 3, each with its cursor\n%s%s", code, out, errOut)
			}
			code, out, errOut = inboxRun(t, append([]string{"dead", "list", "-json", "-after", second.Cursor}, dsn...)...)
			if code != 0 || !strings.HasPrefix(out, `{"id":4,`) || strings.Count(out, "\n") != 1 {
				t.Errorf("dead list -json -after %s: exit %d; want row 4 alone\n%s%s", second.Cursor, code, out, errOut)
			}

			code, out, errOut = inboxRun(t, append([]string{"dead", "purge", "-dry-run", "-ids", "4,2,99"}, dsn...)...)
			if want := "would purge 1 of the 3 ids: 4\nskipped 2: not dead\nskipped 99: not found\n(dry run: nothing was deleted)\n"; code != 0 || out != want {
				t.Errorf("dead purge -dry-run -ids 4,2,99: exit %d, stdout %q; want %q\n%s", code, out, want, errOut)
			}
			code, out, errOut = inboxRun(t, append([]string{"dead", "purge", "-dry-run", "-all"}, dsn...)...)
			if want := "would purge 3 dead rows of every queue (dry run: nothing was deleted)\n"; code != 0 || out != want {
				t.Errorf("dead purge -dry-run -all: exit %d, stdout %q; want %q\n%s", code, out, want, errOut)
			}
			code, out, errOut = inboxRun(t, append([]string{"purge", "-dry-run", "-processed-before", "7d", "-queue", "a"}, dsn...)...)
			if want := "would purge 1 rows of queue \"a\" processed before "; code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, " (dry run: nothing was deleted)\n") {
				t.Errorf("purge -dry-run -processed-before 7d: exit %d, stdout %q; want %q…\n%s", code, out, want, errOut)
			}
			code, out, errOut = inboxRun(t, append([]string{"purge", "-dry-run", "-json", "-processed-before", "60d"}, dsn...)...)
			if want := `{"dry_run":true,"rows":0,"ids":null,"skipped":null}` + "\n"; code != 0 || out != want {
				t.Errorf("purge -dry-run -json -processed-before 60d: exit %d, stdout %q; want %q\n%s", code, out, want, errOut)
			}
			if n := count(); n != 4 {
				t.Fatalf("after the dry runs, %d rows; want the 4 there were", n)
			}

			code, out, errOut = inboxRun(t, append([]string{"dead", "requeue", "-ids", "99,3,2"}, dsn...)...)
			if want := "requeued 1 of the 3 ids (attempts reset to 0): 3\nskipped 99: not found\nskipped 2: not dead\n"; code != 0 || out != want {
				t.Errorf("dead requeue -ids 99,3,2: exit %d, stdout %q; want %q\n%s", code, out, want, errOut)
			}
			code, out, errOut = inboxRun(t, append([]string{"dead", "requeue", "-json", "-ids", "1,3"}, dsn...)...)
			if want := `{"dry_run":false,"rows":1,"ids":[1],"skipped":[{"id":3,"reason":"not dead"}]}` + "\n"; code != 0 || out != want {
				t.Errorf("dead requeue -json -ids 1,3: exit %d, stdout %q; want %q\n%s", code, out, want, errOut)
			}
			code, out, errOut = inboxRun(t, append([]string{"dead", "purge", "-ids", "4,1"}, dsn...)...)
			if want := "purged 1 of the 2 ids: 4\nskipped 1: not dead\n"; code != 0 || out != want {
				t.Errorf("dead purge -ids 4,1: exit %d, stdout %q; want %q\n%s", code, out, want, errOut)
			}
			if n := count(); n != 3 {
				t.Errorf("after the purge of row 4, %d rows; want 3", n)
			}
		})
	}
}
