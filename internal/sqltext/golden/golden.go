// Package golden holds the golden files of internal/sqltext for the tests: the databases and
// table shapes they cover, their format, and the checks that write and read them. It is
// imported by tests only.
//
// A golden file, testdata/<form>/<dialect>-<shape>.golden under internal/sqltext, lists every
// statement one form builds over one table shape on one database, each as a line "-- name"
// followed by the statement on one line and, for a statement built with the roles of its
// parameters (sqltext.Statement), a line "-- args: …" that lists them in the order their
// placeholders appear ("none" for a statement without one), entries apart by a blank line:
//
//	-- claim
//	SELECT "id" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED
//	-- args: none
//
//	-- ack
//	DELETE FROM "jobs" WHERE "id" = $1
//	-- args: id
//
// So a change to the order in which a statement binds its arguments shows in a golden diff, as
// a change to its text does. Publishing's and the operating statements' files carry no args
// line: their callers bind by a record of their own.
//
// Publishing's golden test writes its files from the statements it builds today
// (go test . -run TestGoldenStatements -update) and otherwise checks that it still builds
// them; internal/sqltext's TestGoldens checks that its builders build the same text, byte for
// byte. Every other file's statements (the forms', the wake-ups', the operating statements')
// are run as internal/sqltext builds them, so TestGoldens writes those
// (go test ./internal/sqltext -run TestGoldens -update).
package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/isolation"
)

var update = flag.Bool("update", false, "rewrite the golden files of internal/sqltext from the statements the forms build")

// Entry is one statement of a golden file: its name, its text and, where it was built with
// them, the roles of its parameters in order (sqltext.Statement.ArgList; empty: no args line).
type Entry struct{ Name, SQL, Args string }

// argsPrefix starts the line of an entry's parameters' roles.
const argsPrefix = "-- args: "

// Dialect is a database the golden files cover, by the name their files carry.
type Dialect struct {
	Name string
	D    dialect.Dialect
}

// Dialects are the databases the golden files cover, each at its default level (the
// statements do not depend on the level).
var Dialects = []Dialect{
	{"postgres", dialect.Postgres[isolation.Default]{}},
	{"mysql", dialect.MySQL[isolation.Default]{}},
	{"mariadb", dialect.MariaDB[isolation.Default]{}},
	{"sqlite", dialect.SQLite[isolation.Default]{}},
}

// Shape is a table description the golden files cover, its names as described (unquoted).
type Shape struct {
	Name  string        // the second part of the files' names
	Table sqltext.Table // the columns by role, unquoted; it converts to inbox.Table
	Lease string        // the lease form's column
	Key   []sqltext.KeyPart
}

// Shapes are the table descriptions the golden files cover: every role; id and payload only
// (the id given by the publisher); no attempt column; processed_at without a group; attempts
// counted, and an ack or a death deletes (neither processed_at nor dead_at); a generated id
// alone; every role under names that hold both kinds of quote, spaces and
// reserved words; every role with two of the application's own columns; every role with a
// kind column (jobs by kind, whose claims name the kinds they take); every role with a unique
// key, in each of its three scopes (while queued or in work, while queued, a window after); and
// every role, and processed_at without a group, each with a pauses table (claims pass over
// paused queues); every role with a cancelled_at column (Cancel), a unique key among them;
// every role with a FIFO group column (the lease form's alone); and rates, of a queue's rows
// (rated), of one queue (rated-one-queue), and per kind and limit key (rated-keys).
var Shapes = []Shape{
	{
		Name: "all-roles",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
			DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "queue"}, {Text: ":"}, {Column: "id"}},
	},
	{
		Name:  "id-payload",
		Table: sqltext.Table{Name: "jobs", ID: "id", Payload: "payload"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name: "no-attempt",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name: "processed-no-group",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", RetryAfter: "retry_after"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name:  "attempt-deletes",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name:  "id-only",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Column: "id"}},
	},
	{
		Name: "odd-names",
		Table: sqltext.Table{Name: "select `from` \"where\"", ID: `id "x"`, IDGenerated: true, Payload: "`payload` data",
			Attempt: "order", ProcessedAt: `processed "at"`, Queue: "group", Priority: "`priority`", RetryAfter: "retry after",
			Headers: "select"},
		Lease: "locked `until` \"now\"",
		Key:   []sqltext.KeyPart{{Text: "odd "}, {Column: "group"}, {Text: ":"}, {Column: `id "x"`}},
	},
	{
		Name: "own-columns",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
			Columns: []string{"account", "region"}},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "accounts-"}, {Column: "account"}},
	},
	{
		Name: "kinds",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Kind: "kind", Priority: "priority", RetryAfter: "retry_after",
			Headers: "headers", DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "kind"}, {Text: ":"}, {Column: "id"}},
	},
	uniqueShape("unique", func(*sqltext.Table) {}),
	uniqueShape("unique-while-queued", func(t *sqltext.Table) { t.UniqueWhileQueued = true }),
	uniqueShape("unique-window", func(t *sqltext.Table) { t.UniqueWindow = time.Hour }),
	{
		Name: "paused",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
			DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at", Pauses: "inbox_pauses"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "queue"}, {Text: ":"}, {Column: "id"}},
	},
	{
		Name: "paused-one-queue",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", RetryAfter: "retry_after", Pauses: "inbox_pauses"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name: "cancelled",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
			DeadAt: "dead_at", LastError: "last_error", CancelledAt: "cancelled_at", CreatedAt: "created_at",
			UniqueKey: "unique_key"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name: "groups",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
			DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at", GroupKey: "group_key"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name: "limits",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Kind: "kind", Priority: "priority", RetryAfter: "retry_after",
			DeadAt: "dead_at", LastError: "last_error", LimitKey: "limit_key", Limits: "inbox_limits"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	}, {
		Name: "rated",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Kind: "kind", Priority: "priority", RetryAfter: "retry_after",
			Headers: "headers", DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at", Rates: "inbox_rates"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name: "limits-one-queue",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Limits: "inbox_limits"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	}, {
		Name: "rated-one-queue",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", RetryAfter: "retry_after", Rates: "inbox_rates"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
	{
		Name: "rated-keys",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Kind: "kind", RetryAfter: "retry_after", LimitKey: "limit_key",
			Rates: "inbox_rates"},
		Lease: "locked_until",
		Key:   []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}},
	},
}

// uniqueShape is every role, a unique key among them, with the scope scope sets.
func uniqueShape(name string, scope func(*sqltext.Table)) Shape {
	t := sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
		ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
		DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at", UniqueKey: "unique_key"}
	scope(&t)
	return Shape{Name: name, Table: t, Lease: "locked_until", Key: []sqltext.KeyPart{{Text: "jobs-"}, {Column: "id"}}}
}

// Covers reports whether the golden files of form cover shape sh: a shape with a pauses table
// changes only the claims' predicate (its forms' and the next-due wake-up's) and adds the pauses
// table's statements, so only those forms' files cover it; a shape with limits is the lease
// form's, the limits', the row lock form's and publishing's only; a shape with a rates table is
// in the lease and row lock forms' files (their claims change) and the rates table's; every other shape is in every
// form's files.
func (sh Shape) Covers(form string) bool {
	if sh.Table.Limits != "" {
		// Limits change the lease form's claim and extension, add the limits' statements and
		// the row lock form's, and a limit key column is written by publishing.
		return form == "lease" || form == "limits" || form == "publish" || form == "rowlock"
	}
	switch form {
	case "lease", "rates", "rowlock":
		return true
	case "advisory", "wakeup", "pauses":
		return sh.Table.Rates == ""
	}
	return sh.Table.Pauses == "" && sh.Table.Rates == ""
}

// Dir is the directory of the golden files, internal/sqltext/testdata.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// ext ends every golden file's name. The files are expected output the tests generate, data
// rather than SQL source to be edited or run, so they take the ending Go gives such files (as
// gofmt's and go/printer's testdata do) rather than .sql.
const ext = ".golden"

// Path is the golden file of form over shape on dialect.
func Path(form, dialect, shape string) string {
	return filepath.Join(Dir(), form, dialect+"-"+shape+ext)
}

// Files are the golden files there are, of every form, found by their names.
func Files() ([]string, error) {
	return filepath.Glob(filepath.Join(Dir(), "*", "*"+ext))
}

// Format writes entries in the golden format. It fails on an entry the format cannot hold: no
// name or statement, or a line break in either.
func Format(entries []Entry) ([]byte, error) {
	var b bytes.Buffer
	for i, e := range entries {
		if e.Name == "" || e.SQL == "" || strings.ContainsAny(e.Name+e.SQL+e.Args, "\r\n") {
			return nil, fmt.Errorf("entry %d (%q): a golden entry is a name and a statement, each on one line", i, e.Name)
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("-- " + e.Name + "\n" + e.SQL + "\n")
		if e.Args != "" {
			b.WriteString(argsPrefix + e.Args + "\n")
		}
	}
	return b.Bytes(), nil
}

// Parse reads a golden file's entries.
func Parse(b []byte) ([]Entry, error) {
	var out []Entry
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case line == "":
		case strings.HasPrefix(line, "-- ") && i+1 < len(lines) && lines[i+1] != "":
			e := Entry{Name: strings.TrimPrefix(line, "-- "), SQL: lines[i+1]}
			i++
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], argsPrefix) {
				e.Args = strings.TrimPrefix(lines[i+1], argsPrefix)
				i++
			}
			out = append(out, e)
		default:
			return nil, fmt.Errorf("line %d: %q is neither a \"-- name\" line followed by its statement nor blank", i+1, line)
		}
	}
	return out, nil
}

// Pin is a form's golden test of today's statements: with -update it writes entries to the
// golden file of form over shape on dialect; otherwise it fails t where the file differs.
func Pin(t testing.TB, form, dialect, shape string, entries []Entry) {
	t.Helper()
	if !*update {
		Match(t, form, dialect, shape, entries)
		return
	}
	b, err := Format(entries)
	if err != nil {
		t.Fatalf("%s, %s, %s: %v", form, dialect, shape, err)
	}
	path := Path(form, dialect, shape)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Match fails t where entries differ from the golden file of form over shape on dialect, naming
// the first entry that differs.
func Match(t testing.TB, form, dialect, shape string, entries []Entry) {
	t.Helper()
	path := Path(form, dialect, shape)
	got, err := Format(entries)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: no golden file; write it with %s", path, writer(form))
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	wantEntries, err := Parse(want)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	for i := range max(len(entries), len(wantEntries)) {
		switch {
		case i >= len(entries):
			t.Errorf("%s: entry %d, %q, is not built:\n%s", path, i+1, wantEntries[i].Name, wantEntries[i].SQL)
		case i >= len(wantEntries):
			t.Errorf("%s: entry %d, %q, is built but not in the file:\n%s", path, i+1, entries[i].Name, entries[i].SQL)
		case entries[i] != wantEntries[i]:
			t.Errorf("%s: entry %d differs:\n got -- %s\n     %s\n     args: %s\nwant -- %s\n     %s\n     args: %s", path, i+1,
				entries[i].Name, entries[i].SQL, entries[i].Args, wantEntries[i].Name, wantEntries[i].SQL, wantEntries[i].Args)
		default:
			continue
		}
		return
	}
	t.Errorf("%s: the file differs from its entries in its layout: rewrite it with %s", path, writer(form))
}

// writer is the go test command that writes form's files.
func writer(form string) string {
	switch form {
	case "publish":
		return "go test . -run TestGoldenStatements -update" // the root package
	}
	return "go test ./internal/sqltext -run TestGoldens -update"
}

// Sparse is which of n own columns each row of the golden sparse INSERT ("insert(3) sparse")
// sets: the first row every one, the second all but the last, the third only the last.
func Sparse(n int) [][]bool {
	rows := [][]bool{make([]bool, n), make([]bool, n), make([]bool, n)}
	for j := range n {
		rows[0][j], rows[1][j], rows[2][j] = true, j < n-1, j == n-1
	}
	return rows
}
