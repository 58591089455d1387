package lease

import (
	"slices"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqlshape"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/isolation"
)

// FuzzStatements: whatever the table's and columns' names, every statement the lease form builds
// has the shape it has for plain names, and quotes nothing but those names: no name escapes its
// quotes, whatever quotes, spaces, semicolons or question marks it holds.
func FuzzStatements(f *testing.F) {
	f.Add("jobs", "id", "payload", "attempt", "processed_at", "grp", "priority", "retry_after", "headers", "locked_until")
	f.Add(`a"b`, "`id`", "?", "x y", "'", `""`, "a``b", "; DROP TABLE t; --", "$1", "ü")
	f.Fuzz(func(t *testing.T, name, id, payload, attempt, processed, group, priority, retryAfter, headers, leaseCol string) {
		tbl := inbox.Table{Name: name, ID: id, IDGenerated: true, Payload: payload, Attempt: attempt,
			ProcessedAt: processed, Queue: group, Priority: priority, RetryAfter: retryAfter, Headers: headers}
		// The same roles under plain names: an empty name leaves its role out in both.
		as := func(fuzzed, plain string) string {
			if fuzzed == "" {
				return ""
			}
			return plain
		}
		plain := inbox.Table{Name: "t", ID: "c0", IDGenerated: true, Payload: as(payload, "c1"), Attempt: as(attempt, "c2"),
			ProcessedAt: as(processed, "c3"), Queue: as(group, "c4"), Priority: as(priority, "c5"), RetryAfter: as(retryAfter, "c6"), Headers: as(headers, "c7")}
		names := []string{name, id, payload, attempt, processed, group, priority, retryAfter, headers, leaseCol}
		for _, d := range []dialect.Dialect{dialect.Postgres[isolation.Default]{}, dialect.MySQL[isolation.Default]{}, dialect.SQLite[isolation.Default]{}} {
			st, err := stmt.New(d, tbl)
			if err != nil || slices.Contains(names[1:9], leaseCol) {
				return // a description the form refuses: nothing is built from it
			}
			col, err := d.Quote(leaseCol)
			if err != nil {
				return
			}
			base, err := stmt.New(d, plain)
			if err != nil {
				t.Fatal(err)
			}
			baseCol, _ := d.Quote("c8")
			quote := byte('`')
			if d.Name() == "postgres" {
				quote = '"'
			}
			got, want := all(build(st, col)), all(build(base, baseCol))
			for i := range got {
				shape, idents, literals, err := sqlshape.Split(got[i], quote)
				if err != nil {
					t.Fatalf("%s: %v", d.Name(), err)
				}
				wantShape, _, _, _ := sqlshape.Split(want[i], quote)
				if shape != wantShape || len(literals) != 0 {
					t.Fatalf("%s: statement %d has shape\n%s\nwith literals %q; with plain names it has\n%s", d.Name(), i, shape, literals, wantShape)
				}
				for _, ident := range idents {
					if !slices.Contains(names, ident) {
						t.Fatalf("%s: statement %d quotes %q, which is none of the table's names: %s", d.Name(), i, ident, got[i])
					}
				}
			}
		}
	})
}

// all lists a binding's statements, the MySQL stamp for three ids among them.
func all(s statements) []string {
	out := []string{s.claim, s.extend, s.ack, s.retry, s.retryAfter}
	if s.stamp != nil {
		out = append(out, s.stamp(3))
	}
	return slices.DeleteFunc(out, func(q string) bool { return strings.TrimSpace(q) == "" })
}
