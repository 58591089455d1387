package admin_test

import (
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// The operator of a client's table is the one its description gives: the lease form's column
// comes from Table.LockedUntil, so that a description names every column once.
func TestForTakesTheClientsTable(t *testing.T) {
	d := dialect.Postgres[isolation.Default]{}
	for _, c := range []struct {
		lockedUntil string
		want        bool
	}{{"expires", true}, {"", false}} {
		c2, err := inbox.NewClient(nil, d, inbox.Table{Name: "jobs", ID: "id", Attempt: "attempt", LockedUntil: c.lockedUntil})
		if err != nil {
			t.Fatal(err)
		}
		a, err := admin.For(c2)
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := a.Schema()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(strings.Join(stmts, ";"), `"expires"`); got != c.want {
			t.Errorf("LockedUntil %q: the schema has the lease column: %v, want %v:\n%s", c.lockedUntil, got, c.want, strings.Join(stmts, ";\n"))
		}
	}
	if _, err := admin.New(nil, d, inbox.Table{Name: "jobs", ID: "id", Attempt: "attempt", LockedUntil: "attempt"}); err == nil || !strings.Contains(err.Error(), "LockedUntil") {
		t.Errorf("LockedUntil naming the Attempt column: %v, want an error naming LockedUntil", err)
	}
}
