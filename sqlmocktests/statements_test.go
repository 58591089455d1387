package sqlmocktests

import (
	"database/sql/driver"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// The statements the tests expect are the text of internal/sqltext's golden files, the reviewed
// SQL of every form per database and table shape: a test runs a form over one of those shapes
// and expects, by name, what the form's file for that shape and database holds.

// shape is a table description the golden files cover.
type shape struct {
	name  string      // its name in the golden files' names
	table inbox.Table // its columns by role
	lease string      // its lease column
	key   string      // its advisory key template
}

// goldenShape is the shape the golden files call name.
func goldenShape(name string) shape {
	for _, s := range golden.Shapes {
		if s.Name == name {
			return shape{name: s.Name, table: inbox.Table(s.Table), lease: s.Lease, key: template(s.Key)}
		}
	}
	panic("no golden shape " + name)
}

// template is key as the advisory form's key template takes it: each column in braces.
func template(key []sqltext.KeyPart) string {
	var b strings.Builder
	for _, p := range key {
		if p.Column != "" {
			b.WriteString("{" + p.Column + "}")
			continue
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

var (
	// fullShape has every role: Ack stamps processed_at, Fail dead_at and last_error, claims
	// go by queue, priority and retry_after. Its advisory key is "jobs-{queue}:{id}".
	fullShape = goldenShape("all-roles")
	// minimalShape has an id and a payload: Ack deletes, nothing counts attempts or delays.
	// Its advisory key is "jobs-{id}".
	minimalShape = goldenShape("id-payload")
)

// claimed is the rows a claim (or an advisory take or read) over sh returns: its id, then its
// payload, attempt, queue, kind and headers where sh has them, with queue q.
func (sh shape) claimed(q string, rs ...row) *sqlmock.Rows {
	t := sh.table
	cols := []string{t.ID}
	for _, c := range []string{t.Payload, t.Attempt, t.Queue, t.Kind, t.Headers} {
		if c != "" {
			cols = append(cols, c)
		}
	}
	rows := sqlmock.NewRows(cols)
	for _, r := range rs {
		vals := []driver.Value{r.id}
		if t.Payload != "" {
			vals = append(vals, nullable(r.payload))
		}
		if t.Attempt != "" {
			vals = append(vals, r.attempt)
		}
		if t.Queue != "" {
			vals = append(vals, q)
		}
		if t.Kind != "" {
			vals = append(vals, r.kind)
		}
		if t.Headers != "" {
			vals = append(vals, r.headers)
		}
		rows.AddRow(vals...)
	}
	return rows
}

// nullable is b, or NULL where b is nil.
func nullable(b []byte) driver.Value {
	if b == nil {
		return nil
	}
	return b
}

// row is one row a mocked claim returns.
type row struct {
	id      int64
	attempt int64  // as the claim's statement reads it
	payload []byte // nil: NULL
	headers any    // the headers column's text, or nil
	kind    string // the kind column's text, where the shape has one
}

// advisoryKey is row id's advisory key under sh's template, in queue q.
func (sh shape) advisoryKey(q string, id int64) string {
	return strings.NewReplacer("{queue}", q, "{id}", strconv.FormatInt(id, 10)).Replace(sh.key)
}

// statements are one golden file's statements by name: those one form builds over one table
// shape on one database.
type statements struct {
	t      testing.TB
	path   string
	byName map[string]string
}

// goldenFiles caches the golden files read, by path.
var goldenFiles = struct {
	sync.Mutex
	byPath map[string][]golden.Entry
}{byPath: map[string][]golden.Entry{}}

// goldenSQL is the golden file of form over sh on database db ("postgres", "mysql", "mariadb"
// or "sqlite"), read once per test binary; t fails at once where there is none.
func goldenSQL(t testing.TB, form, db string, sh shape) statements {
	t.Helper()
	path := golden.Path(form, db, sh.name)
	goldenFiles.Lock()
	defer goldenFiles.Unlock()
	entries, ok := goldenFiles.byPath[path]
	if !ok {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("the golden file of %s over %s on %s: %v", form, sh.name, db, err)
		}
		if entries, err = golden.Parse(b); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		goldenFiles.byPath[path] = entries
	}
	s := statements{t: t, path: path, byName: map[string]string{}}
	for _, e := range entries {
		s.byName[e.Name] = e.SQL
	}
	return s
}

// of is the statement named name; the test stops where the file has none.
func (s statements) of(name string) string {
	s.t.Helper()
	q, ok := s.byName[name]
	if !ok {
		s.t.Fatalf("%s has no statement %q", s.path, name)
	}
	return q
}

// has reports whether the file has a statement named name: which it has depends on the table.
func (s statements) has(name string) bool {
	_, ok := s.byName[name]
	return ok
}
