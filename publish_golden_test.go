package inbox

import (
	"fmt"
	"testing"

	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// TestGoldenStatements pins the INSERTs that publishing builds, of one row and of three, and
// the one-row INSERT that hands back its id (EnqueueIDs), for each golden table shape on each
// database, in internal/sqltext/testdata/publish, every message setting each of the shape's own
// columns: with -update it writes the files, otherwise it checks that publishing still builds
// what they hold. The files are what internal/sqltext's builders are proven against.
func TestGoldenStatements(t *testing.T) {
	for _, dl := range golden.Dialects {
		for _, sh := range golden.Shapes {
			var e []golden.Entry
			build := func(name string, n int, ids, notify bool) {
				tbl := Table(sh.Table)
				tbl.Notify = notify
				msgs := make([]Message, n)
				for i := range msgs {
					msgs[i].ID = int64(i + 1)
					if len(sh.Table.Columns) > 0 {
						msgs[i].Columns = map[string]any{}
					}
					for _, c := range sh.Table.Columns {
						msgs[i].Columns[c] = i
					}
				}
				sts, err := statements(dl.D, tbl, msgs, ids)
				if err != nil {
					t.Fatalf("%s, %s: %v", dl.Name, sh.Name, err)
				}
				if len(sts) != 1 {
					t.Fatalf("%s, %s: publishing %d rows builds %d statements, want 1", dl.Name, sh.Name, n, len(sts))
				}
				e = append(e, golden.Entry{Name: name, SQL: sts[0].query})
			}
			build("insert(1)", 1, false, false)
			build("insert(3)", 3, false, false)
			build("insertID", 1, true, false)
			if dl.D.Caps().Notifies {
				build("insert(1) notifying", 1, false, true)
				build("insert(3) notifying", 3, false, true)
			}
			golden.Pin(t, "publish", dl.Name, sh.Name, e)
		}
	}
}

// TestStatementsKeepOrder: messages that set different own columns are written by runs, in the
// messages' order, each run's statement binding its own columns after the roles'.
func TestStatementsKeepOrder(t *testing.T) {
	tbl := Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload"}
	msgs := []Message{
		{Payload: []byte("a"), Columns: map[string]any{"account": "acme"}},
		{Payload: []byte("b"), Columns: map[string]any{"account": "bolt"}},
		{Payload: []byte("c")},
		{Payload: []byte("d"), Columns: map[string]any{"region": "eu", "account": "acme"}},
	}
	sts, err := statements(golden.Dialects[0].D, tbl, msgs, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		query       string
		args        string
		first, rows int
	}{
		{`INSERT INTO "jobs" ("payload", "account") VALUES ($1, $2), ($3, $4)`, "[[97] acme [98] bolt]", 0, 2},
		{`INSERT INTO "jobs" ("payload") VALUES ($1)`, "[[99]]", 2, 1},
		{`INSERT INTO "jobs" ("payload", "account", "region") VALUES ($1, $2, $3)`, "[[100] acme eu]", 3, 1},
	}
	if len(sts) != len(want) {
		t.Fatalf("%d statements, want %d: %+v", len(sts), len(want), sts)
	}
	for i, w := range want {
		if sts[i].query != w.query || fmt.Sprint(sts[i].args) != w.args || sts[i].first != w.first || sts[i].rows != w.rows {
			t.Errorf("statement %d = %q %v (rows %d from %d), want %q %s (rows %d from %d)", i, sts[i].query, sts[i].args, sts[i].rows, sts[i].first, w.query, w.args, w.rows, w.first)
		}
	}
}
