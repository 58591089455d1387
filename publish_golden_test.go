package inbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
	"github.com/sqlinbox/inbox/isolation"
)

// TestGoldenStatements pins the INSERTs that publishing builds, of one row and of three, and
// the one-row INSERT that hands back its id (EnqueueIDs), for each golden table shape on each
// database, in internal/sqltext/testdata/publish, every message setting each of the shape's own
// columns, and where VALUES take DEFAULT three messages that set different ones (golden.Sparse): with -update it writes the files, otherwise it checks that publishing still builds
// what they hold. The files are what internal/sqltext's builders are proven against.
func TestGoldenStatements(t *testing.T) {
	for _, dl := range golden.Dialects {
		for _, sh := range golden.Shapes {
			if !sh.Covers("publish") {
				continue
			}
			var e []golden.Entry
			// build publishes n messages, each setting the own columns sets says (nil: all of them).
			build := func(name string, n int, ids, notify bool, sets [][]bool) {
				tbl := Table(sh.Table)
				tbl.Notify = notify
				msgs := make([]Message, n)
				for i := range msgs {
					msgs[i].ID = int64(i + 1)
					if len(sh.Table.Columns) > 0 {
						msgs[i].Columns = map[string]any{}
					}
					for j, c := range sh.Table.Columns {
						if sets == nil || sets[i][j] {
							msgs[i].Columns[c] = i
						}
					}
				}
				sts, err := statements(dl.D, tbl, msgs, ids, time.Now())
				if err != nil {
					t.Fatalf("%s, %s: %v", dl.Name, sh.Name, err)
				}
				if len(sts) != 1 {
					t.Fatalf("%s, %s: publishing %d rows builds %d statements, want 1", dl.Name, sh.Name, n, len(sts))
				}
				e = append(e, golden.Entry{Name: name, SQL: sts[0].query})
			}
			build("insert(1)", 1, false, false, nil)
			build("insert(3)", 3, false, false, nil)
			if n := len(sh.Table.Columns); dl.D.Caps().ValuesDefault && n > 1 {
				build("insert(3) sparse", 3, false, false, golden.Sparse(n))
			}
			build("insertID", 1, true, false, nil)
			if sh.Table.UniqueKey != "" {
				e = append(e, golden.Entry{Name: "insert unique", SQL: uniqueInsert(t, dl.D, Table(sh.Table))})
			}
			if dl.D.Caps().Notifies {
				build("insert(1) notifying", 1, false, true, nil)
				build("insert(3) notifying", 3, false, true, nil)
			}
			golden.Pin(t, "publish", dl.Name, sh.Name, e)
		}
	}
}

// TestStatementsKeepOrder: messages that set different own columns are written in the
// messages' order: in one statement where VALUES take DEFAULT (Postgres here), each row writing
// DEFAULT for the columns it leaves out; elsewhere (SQLite) by runs of messages that set the same
// columns, each run's statement binding its own columns after the roles'.
func TestStatementsKeepOrder(t *testing.T) {
	tbl := Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload"}
	msgs := []Message{
		{Payload: []byte("a"), Columns: map[string]any{"account": "acme"}},
		{Payload: []byte("b"), Columns: map[string]any{"account": "bolt"}},
		{Payload: []byte("c")},
		{Payload: []byte("d"), Columns: map[string]any{"region": "eu", "account": "acme"}},
	}
	type want struct {
		query       string
		args        string
		first, rows int
	}
	for _, tc := range []struct {
		d    dialect.Dialect
		want []want
	}{
		{dialect.Postgres[isolation.Default]{}, []want{
			{`INSERT INTO "jobs" ("payload", "account", "region") VALUES ($1, $2, DEFAULT), ($3, $4, DEFAULT), ($5, DEFAULT, DEFAULT), ($6, $7, $8)`, "[[97] acme [98] bolt [99] [100] acme eu]", 0, 4},
		}},
		{dialect.SQLite[isolation.Default]{}, []want{
			{"INSERT INTO `jobs` (`payload`, `account`) VALUES (?, ?), (?, ?)", "[[97] acme [98] bolt]", 0, 2},
			{"INSERT INTO `jobs` (`payload`) VALUES (?)", "[[99]]", 2, 1},
			{"INSERT INTO `jobs` (`payload`, `account`, `region`) VALUES (?, ?, ?)", "[[100] acme eu]", 3, 1},
		}},
	} {
		sts, err := statements(tc.d, tbl, msgs, false, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(sts) != len(tc.want) {
			t.Fatalf("%s: %d statements, want %d: %+v", tc.d.Name(), len(sts), len(tc.want), sts)
		}
		for i, w := range tc.want {
			if sts[i].query != w.query || fmt.Sprint(sts[i].args) != w.args || sts[i].first != w.first || sts[i].rows != w.rows {
				t.Errorf("%s: statement %d = %q %v (rows %d from %d), want %q %s (rows %d from %d)", tc.d.Name(), i, sts[i].query, sts[i].args, sts[i].rows, sts[i].first, w.query, w.args, w.rows, w.first)
			}
		}
	}
}

// uniqueInsert is the INSERT that publishing builds for a message with a unique key on d, the
// message setting each of tbl's own columns.
func uniqueInsert(t *testing.T, d dialect.Dialect, tbl Table) string {
	t.Helper()
	m := Message{ID: 1, UniqueKey: "k"}
	for _, c := range tbl.Columns {
		if m.Columns == nil {
			m.Columns = map[string]any{}
		}
		m.Columns[c] = 0
	}
	sts, err := statements(d, tbl, []Message{m}, false, time.Now())
	if err != nil || len(sts) != 1 || !sts[0].unique {
		t.Fatalf("%s: publishing a message with a unique key builds %d statements (%v), want one keyed INSERT", d.Name(), len(sts), err)
	}
	return sts[0].query
}

// TestInsertRowsPerStatement: a publish of many rows writes 1,000 rows an INSERT on Postgres and
// MySQL, and on SQLite as many as keep an INSERT at 1,000 bound values (Caps.InsertValues): 166
// rows of six values, every row of the bench table's one.
func TestInsertRowsPerStatement(t *testing.T) {
	job := Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Queue: "queue", Kind: "kind", Priority: "priority", RetryAfter: "retry_after", CreatedAt: "created_at"}
	bench := Table{Name: "bench", ID: "id", IDGenerated: true, Payload: "payload"}
	msgs := make([]Message, 2500)
	for i := range msgs {
		msgs[i] = Message{Queue: "q", Payload: []byte("x")}
	}
	for _, c := range []struct {
		d     dialect.Dialect
		tbl   Table
		first int // rows of the first INSERT
		n     int // INSERTs
	}{
		{dialect.Postgres[isolation.Default]{}, job, 1000, 3},
		{dialect.MySQL[isolation.Default]{}, job, 1000, 3},
		{dialect.SQLite[isolation.Default]{}, job, 166, 16},
		{dialect.SQLite[isolation.Default]{}, bench, 1000, 3},
	} {
		sts, err := statements(c.d, c.tbl, msgs, false, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, st := range sts {
			rows += st.rows
		}
		if len(sts) != c.n || sts[0].rows != c.first || rows != len(msgs) || c.d.Caps().InsertValues > 0 && len(sts[0].args) > c.d.Caps().InsertValues {
			t.Errorf("%s, table %s: %d INSERTs, the first of %d rows (%d values), %d rows in all; want %d INSERTs, the first of %d rows, %d rows", c.d.Name(), c.tbl.Name, len(sts), sts[0].rows, len(sts[0].args), rows, c.n, c.first, len(msgs))
		}
	}
}
