package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

var sqliteTime = dialect.SQLite[isolation.Default]{}.Time

// TestRolesInferredFromColumns: on a table without the README's headers column,
// and with a kind and a created_at column, the commands need no flag (the roles follow the
// columns), a flag that names a column the table lacks fails with the statement that adds it,
// and an empty flag leaves its role out.
func TestRolesInferredFromColumns(t *testing.T) {
	db, path := sqliteJobs(t)
	for _, stmt := range []string{
		"ALTER TABLE jobs DROP COLUMN headers",
		"ALTER TABLE jobs ADD COLUMN kind TEXT",
		"ALTER TABLE jobs ADD COLUMN created_at TEXT",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	created := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	if _, err := db.Exec("INSERT INTO jobs (queue, kind, created_at, payload) VALUES ('a', 'mail', ?, '{}')", sqliteTime(created)); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := inboxRun(t, "stats", "-dsn", path)
	if code != 0 || !strings.Contains(out, "mail") {
		t.Fatalf("stats with no flag on a table without headers, with kinds: exit %d, want 0 and the kind mail:\n%s%s", code, out, errOut)
	}
	code, out, errOut = inboxRun(t, "show", "1", "-dsn", path)
	if code != 0 || !strings.Contains(out, "created at") || !strings.Contains(out, "2026-12-01 08:30:00.000000Z") || strings.Contains(out, "headers") {
		t.Fatalf("show 1: exit %d; want its created_at, and no headers line:\n%s%s", code, out, errOut)
	}
	code, out, errOut = inboxRun(t, "stats", "-dsn", path, "-headers", "headers")
	if code != 2 || !strings.Contains(errOut, "-headers:") || !strings.Contains(errOut, "headers") || !strings.Contains(errOut, "ALTER TABLE") {
		t.Errorf("stats -headers headers on a table without it: exit %d; want 2, naming the flag, the column and the ALTER TABLE that adds it:\n%s%s", code, out, errOut)
	}
	code, out, errOut = inboxRun(t, "stats", "-dsn", path, "-created-at=", "-kind-column=")
	if code != 0 || strings.Contains(out, "mail") {
		t.Errorf("stats -created-at= -kind-column=: exit %d; want 0 and no kinds:\n%s%s", code, out, errOut)
	}
}

// TestShowPrintsTheRowWhole: show prints a row's columns, its JSON payload indented, a binary
// one as a hex dump, and -json the row as admin.Row encodes it; an unknown id fails, a missing
// or malformed one is a usage error.
func TestShowPrintsTheRowWhole(t *testing.T) {
	db, path := sqliteJobs(t)
	for _, p := range [][]byte{[]byte(`{"invoice":7,"lines":[1,2]}`), {0x00, 0xff, 0x10}, []byte("plain <text>")} {
		if _, err := db.Exec("INSERT INTO jobs (queue, payload, headers, attempt, last_error) VALUES ('billing', ?, '{\"trace\":\"t1\"}', 2, 'boom\nsecond line')", p); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"show", "1", "-dsn", path}, []string{"\nqueue ", " billing\n", "\nattempt ", " 2\n", `{"trace":"t1"}`, " boom\n", "  second line\n", "payload (27 bytes, JSON):\n{\n  \"invoice\": 7,"}},
		{[]string{"show", "-dsn", path, "2"}, []string{"payload (3 bytes, hex):\n00000000  00 ff 10"}},
		{[]string{"show", "-dsn", path, "3"}, []string{"payload (12 bytes, text):\nplain <text>\n"}},
	} {
		code, out, errOut := inboxRun(t, c.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", strings.Join(c.args, " "), code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: want %q in:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}

	code, out, _ := inboxRun(t, "show", "2", "-dsn", path, "-json")
	var r struct {
		admin.Row
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.ID != 2 || r.State != "due" || string(r.Payload) != "\x00\xff\x10" || r.Attempt != 2 || r.Queue != "billing" {
		t.Errorf("show 2 -json: exit %d, %v; want row 2 as admin.Row encodes it:\n%s", code, err, out)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"show", "99"}, 1, `inbox show: no such row: table "jobs" holds no row 99`},
		{[]string{"show"}, 2, "inbox show: name the row's id: inbox show 42"},
		{[]string{"show", "x1"}, 2, `inbox show: "x1" is not a row id`},
		{[]string{"show", "1", "2"}, 2, `inbox show: unexpected argument "2"`},
	} {
		code, _, errOut := inboxRun(t, append(c.args, "-dsn", path)...)
		if code != c.code || !strings.HasPrefix(errOut, c.says) {
			t.Errorf("inbox %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.says)
		}
	}
}

// TestRowsListsAState: rows -state lists the rows in that state alone, highest id first, a page
// at a time, the next page from the id it prints.
func TestRowsListsAState(t *testing.T) {
	db, path := sqliteJobs(t)
	later := time.Now().Add(time.Hour).UTC()
	for i := range 5 {
		runAt := any(nil)
		if i%2 == 1 {
			runAt = sqliteTime(later)
		}
		if _, err := db.Exec("INSERT INTO jobs (queue, retry_after) VALUES (?, ?)", fmt.Sprintf("q%d", i), runAt); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(out string) []string {
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, "next page") {
				got = append(got, f[0]+":"+f[1])
			}
		}
		return got
	}
	code, out, errOut := inboxRun(t, "rows", "-dsn", path, "-state", "delayed")
	if got := strings.Join(ids(out), " "); code != 0 || got != "4:delayed 2:delayed" || !strings.Contains(out, later.Format("2006-01-02 15:04:05")) {
		t.Fatalf("rows -state delayed: exit %d, rows %q; want 4 and 2, with their run time:\n%s%s", code, got, out, errOut)
	}
	code, out, _ = inboxRun(t, "rows", "-dsn", path, "-limit", "2")
	if got := strings.Join(ids(out), " "); code != 0 || got != "5:due 3:due" || !strings.Contains(out, "next page: -before-id 3") {
		t.Fatalf("rows -limit 2: exit %d, rows %q; want due rows 5 and 3, and the next page:\n%s", code, got, out)
	}
	code, out, _ = inboxRun(t, "rows", "-dsn", path, "-limit", "2", "-before-id", "3")
	if got := strings.Join(ids(out), " "); code != 0 || got != "1:due" || strings.Contains(out, "next page") {
		t.Errorf("rows -before-id 3: exit %d, rows %q; want row 1 alone, no next page:\n%s", code, got, out)
	}
	code, out, _ = inboxRun(t, "rows", "-dsn", path, "-state", "in-work")
	if got := ids(out); code != 0 || len(got) != 0 {
		t.Errorf("rows -state in-work: exit %d, rows %q; want none", code, got)
	}
	// A kind column added later: the command finds it by its name.
	if _, err := db.Exec("ALTER TABLE jobs ADD COLUMN kind TEXT"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE jobs SET kind = CASE WHEN id IN (1, 5) THEN 'welcome' ELSE 'report' END"); err != nil {
		t.Fatal(err)
	}
	code, out, _ = inboxRun(t, "rows", "-dsn", path, "-kind", "welcome")
	if got := strings.Join(ids(out), " "); code != 0 || got != "5:due 1:due" || !strings.Contains(out, "welcome") || strings.Contains(out, "report") {
		t.Errorf("rows -kind welcome: exit %d, rows %q; want due rows 5 and 1, their kind shown:\n%s", code, got, out)
	}
	if code, _, errOut := inboxRun(t, "rows", "-dsn", path, "-state", "late"); code != 2 || !strings.Contains(errOut, `no state "late"`) {
		t.Errorf("rows -state late: exit %d, %q; want 2, naming the states", code, errOut)
	}
}

// TestRescheduleMovesAQueuedRow: reschedule moves a due row ahead (rows then lists it as
// delayed) and back (due again), and says why it leaves a processed or a missing row as it was.
func TestRescheduleMovesAQueuedRow(t *testing.T) {
	db, path := sqliteJobs(t)
	if _, err := db.Exec("INSERT INTO jobs (queue) VALUES ('a'), ('a')"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE jobs SET processed_at = ? WHERE id = 2", sqliteTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	code, out, errOut := inboxRun(t, "reschedule", "1", "-dsn", path, "-at", at.Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "row 1 runs at "+at.Format("2006-01-02 15:04:05")) {
		t.Fatalf("reschedule 1 -at: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "rows", "-dsn", path, "-state", "delayed"); !strings.Contains(out, "\n1 ") {
		t.Fatalf("after reschedule -at, rows -state delayed does not list row 1:\n%s", out)
	}
	if code, out, errOut := inboxRun(t, "reschedule", "-dsn", path, "-in", "0s", "1"); code != 0 || out != "row 1 is due now\n" {
		t.Fatalf("reschedule -in 0s 1: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "rows", "-dsn", path, "-state", "due"); !strings.Contains(out, "\n1 ") {
		t.Fatalf("after reschedule -in 0s, rows -state due does not list row 1:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"reschedule", "2", "-in", "1h"}, 1, "the row is processed, dead or cancelled"},
		{[]string{"reschedule", "-key", "k1", "-in", "1h"}, 1, "RescheduleKey needs the UniqueKey role"},
		{[]string{"reschedule", "1", "-key", "k1", "-in", "1h"}, 2, "by its id or by -key, one of them"},
		{[]string{"reschedule", "9", "-in", "1h"}, 1, "no row has the id"},
		{[]string{"reschedule", "1"}, 2, "give the run time by -at or by -in"},
		{[]string{"reschedule", "1", "-at", "tomorrow"}, 2, "write the time as 2026-12-24T08:00:00Z"},
	} {
		code, _, errOut := inboxRun(t, append(c.args, "-dsn", path)...)
		if code != c.code || !strings.Contains(errOut, c.says) || strings.Contains(errOut, "inbox: ") {
			t.Errorf("inbox %s: exit %d, stderr %q; want %d and %q, with one inbox prefix", strings.Join(c.args, " "), code, errOut, c.code, c.says)
		}
	}
}

// TestRescheduleByUniqueKey: reschedule -key moves the row that holds the key, and says none
// holds a key no row has.
func TestRescheduleByUniqueKey(t *testing.T) {
	db, path := sqliteJobs(t)
	for _, st := range []string{
		"ALTER TABLE jobs ADD COLUMN unique_key TEXT",
		"CREATE UNIQUE INDEX jobs_unique_key_key ON jobs (unique_key)",
		"INSERT INTO jobs (queue, unique_key) VALUES ('a', 'report-7'), ('a', NULL)",
	} {
		if _, err := db.Exec(st); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := inboxRun(t, "reschedule", "-dsn", path, "-key", "report-7", "-at", "2099-01-02T03:04:05Z")
	if code != 0 || out != "row 1 runs at 2099-01-02 03:04:05.000000Z\n" {
		t.Fatalf("reschedule -key report-7: exit %d, %q%s; want row 1 moved", code, out, errOut)
	}
	if _, out, _ := inboxRun(t, "rows", "-dsn", path, "-state", "delayed"); !strings.Contains(out, "\n1 ") || strings.Contains(out, "\n2 ") {
		t.Errorf("after reschedule -key, rows -state delayed lists:\n%s\nwant row 1 alone", out)
	}
	if code, _, errOut := inboxRun(t, "reschedule", "-dsn", path, "-key", "nosuch", "-in", "1h"); code != 1 || !strings.Contains(errOut, `no row holds the unique key "nosuch"`) {
		t.Errorf("reschedule -key nosuch: exit %d, %q; want 1, no row holds it", code, errOut)
	}
}

// TestGroupsListsTheGroups: inbox groups lists each group with rows pending, its head and what
// it waits for, and -blocked the groups whose head retries later.
func TestGroupsListsTheGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	if code, out, errOut := inboxRun(t, "schema", "-dsn", path, "-group-key", "-apply"); code != 0 {
		t.Fatalf("schema -group-key -apply: exit %d\n%s%s", code, out, errOut)
	}
	db, _ := liveDB(t, liveDSN{"sqlite", path})
	for _, st := range []string{
		"INSERT INTO jobs (queue, group_key) VALUES ('q', 'a'), ('q', 'a'), ('q', 'b'), ('q', NULL)",
	} {
		if _, err := db.Exec(st); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("UPDATE jobs SET attempt = 3, retry_after = ? WHERE id = 3", sqliteTime(time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := inboxRun(t, "groups", "-dsn", path)
	if code != 0 || !strings.Contains(out, "q      a      1     2        nothing: its head is next") || !strings.Contains(out, "blocked: its head failed 3 times") {
		t.Fatalf("groups: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = inboxRun(t, "groups", "-dsn", path, "-blocked")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "q      b      3") {
		t.Errorf("groups -blocked: exit %d\n%s; want group b alone", code, out)
	}
}
