package inbox

import (
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
	"github.com/sqlinbox/inbox/outcome"
)

// The row types of golden shapes: each tags the columns its shape names by hand.

type allRolesRow struct {
	ID          int64             `inbox:"id,generated"`
	Payload     []byte            `inbox:"payload"`
	Attempt     int               `inbox:"attempt"`
	ProcessedAt *time.Time        `inbox:"processed_at"`
	Queue       string            `inbox:"queue"`
	Priority    int               `inbox:"priority"`
	RetryAfter  *time.Time        `inbox:"retry_after"`
	Headers     map[string]string `inbox:"headers"`
	DeadAt      *time.Time        `inbox:"dead_at"`
	LastError   *string           `inbox:"last_error"`
	CreatedAt   *time.Time        `inbox:"created_at"`
	LockedUntil *time.Time        `inbox:"locked_until"`
}

type idPayloadRow struct {
	ID      int64     `inbox:"id"`
	Payload string    `inbox:"payload"`
	Lease   time.Time `inbox:"locked_until"`
}

type oddNamesRow struct {
	ID          int64             "inbox:\"id,generated,column=id \\\"x\\\"\""
	Payload     []byte            "inbox:\"payload,column=`payload` data\""
	Attempt     int               `inbox:"attempt,column=order"`
	ProcessedAt *time.Time        "inbox:\"processed_at,column=processed \\\"at\\\"\""
	Queue       string            `inbox:"queue,column=group"`
	Priority    int               "inbox:\"priority,column=`priority`\""
	RetryAfter  *time.Time        `inbox:"retry_after,column=retry after"`
	Headers     map[string]string `inbox:"headers,column=select"`
	LockedUntil *time.Time        "inbox:\"locked_until,column=locked `until` \\\"now\\\"\""
}

type ownColumnsRow struct {
	ID          int64             `inbox:"id,generated"`
	Payload     []byte            `inbox:"payload"`
	Attempt     int               `inbox:"attempt"`
	ProcessedAt *time.Time        `inbox:"processed_at"`
	Queue       string            `inbox:"queue"`
	Priority    int               `inbox:"priority"`
	RetryAfter  *time.Time        `inbox:"retry_after"`
	Headers     map[string]string `inbox:"headers"`
	Account     string            `inbox:"column=account"`
	Region      *string           `inbox:"column=region"`
	LockedUntil *time.Time        `inbox:"locked_until"`
}

// TestGoldenRowTypes: a description derived from a row type's tags is the one its golden shape
// writes by hand, and builds the same statements on every database: publishing's, and the row
// lock and lease forms' claims and settlements, each equal to the manual description's and to
// the entry of the same name in the shape's golden file (internal/sqltext/testdata).
func TestGoldenRowTypes(t *testing.T) {
	derive := map[string]func(name string) (Table, error){
		"all-roles":   TableOf[allRolesRow],
		"id-payload":  TableOf[idPayloadRow],
		"odd-names":   TableOf[oddNamesRow],
		"own-columns": TableOf[ownColumnsRow],
	}
	checked := 0
	for _, sh := range golden.Shapes {
		of, ok := derive[sh.Name]
		if !ok {
			continue
		}
		got, err := of(sh.Table.Name)
		if err != nil {
			t.Fatalf("%s: %v", sh.Name, err)
		}
		manual := Table(sh.Table)
		manual.LockedUntil = sh.Lease
		if !reflect.DeepEqual(got, manual) {
			t.Fatalf("%s: the row type describes\n%+v\nthe manual description is\n%+v", sh.Name, got, manual)
		}
		for _, dl := range golden.Dialects {
			want := shapeStatements(t, dl.D, manual)
			have := shapeStatements(t, dl.D, got)
			if !reflect.DeepEqual(have, want) {
				t.Errorf("%s, %s: the derived description builds\n%v\nthe manual one\n%v", dl.Name, sh.Name, have, want)
			}
			for form, entries := range have {
				checked += matchGolden(t, form, dl.Name, sh.Name, entries)
			}
		}
	}
	if checked < 4*len(derive)*len(golden.Dialects) {
		t.Errorf("only %d statements were found in the golden files to compare", checked)
	}
}

// shapeStatements builds, over t on d, publishing's INSERTs of one row (each setting every own
// column) and with its id, and the claims and settlements of the forms the database takes, by
// their names in the golden files.
func shapeStatements(t *testing.T, d dialect.Dialect, tbl Table) map[string][]golden.Entry {
	t.Helper()
	out := map[string][]golden.Entry{}
	for _, ids := range []bool{false, true} {
		m := Message{ID: 1}
		if len(tbl.Columns) > 0 {
			m.Columns = map[string]any{}
			for _, c := range tbl.Columns {
				m.Columns[c] = 0
			}
		}
		sts, err := statements(d, tbl, []Message{m}, ids, time.Now())
		if err != nil || len(sts) != 1 {
			t.Fatalf("%s, table %q: publishing builds %d statements: %v", d.Name(), tbl.Name, len(sts), err)
		}
		name := map[bool]string{false: "insert(1)", true: "insertID"}[ids]
		out["publish"] = append(out["publish"], golden.Entry{Name: name, SQL: sts[0].query})
	}
	q, err := tbl.Quote(d)
	if err != nil {
		t.Fatal(err)
	}
	ql, err := d.Quote(tbl.LockedUntil)
	if err != nil {
		t.Fatal(err)
	}
	s := sqltext.New(d.Caps(), sqltext.Table(q))
	if d.Caps().SkipLocked {
		r := s.RowLock()
		out["rowlock"] = []golden.Entry{
			{Name: "claim", SQL: r.Claim(1).SQL},
			{Name: "ack", SQL: r.Settle(outcome.KindAck, sqltext.ByID()).SQL},
			{Name: "retry", SQL: r.Settle(outcome.KindRetry, sqltext.ByID()).SQL},
		}
	}
	l := s.Lease(ql)
	out["lease"] = []golden.Entry{
		{Name: "claim", SQL: l.Claim(1).SQL},
		{Name: "extend", SQL: l.Extend(sqltext.ByIDAndToken()).SQL},
		{Name: "ack", SQL: l.Settle(outcome.KindAck, sqltext.ByIDAndToken()).SQL},
		{Name: "retry", SQL: l.Settle(outcome.KindRetry, sqltext.ByIDAndToken()).SQL},
	}
	for form, entries := range out {
		// A statement the table does not have is empty, and not in the golden file.
		out[form] = slices.DeleteFunc(entries, func(e golden.Entry) bool { return e.SQL == "" })
	}
	return out
}

// matchGolden fails t where an entry differs from the entry of its name in the golden file of
// form over shape on dialect, and returns how many it compared.
func matchGolden(t *testing.T, form, dialect, shape string, entries []golden.Entry) int {
	t.Helper()
	path := golden.Path(form, dialect, shape)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, err := golden.Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	byName := map[string]string{}
	for _, e := range file {
		byName[e.Name] = e.SQL
	}
	for _, e := range entries {
		want, ok := byName[e.Name]
		switch {
		case !ok:
			t.Errorf("%s: no entry %q", path, e.Name)
		case e.SQL != want:
			t.Errorf("%s: entry %q:\n got %s\nwant %s", path, e.Name, e.SQL, want)
		}
	}
	return len(entries)
}
