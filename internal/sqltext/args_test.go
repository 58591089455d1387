package sqltext_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqlshape"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
)

// TestArgsMatchPlaceholders: every statement built with its parameters' roles, of every form,
// database and shape, lists as many roles as its text has placeholders (outside quoted names
// and literals), so its golden args line accounts for every placeholder. With TestGoldens,
// which pins each args line, a change to the order of two arguments fails.
func TestArgsMatchPlaceholders(t *testing.T) {
	checked := 0
	for _, dl := range golden.Dialects {
		for _, sh := range golden.Shapes {
			for _, e := range all(t, dl.D, sh) {
				if e.Args == "" {
					continue // a statement its caller binds by its own rule (publishing)
				}
				n, err := placeholders(dl.D.Caps(), e.SQL)
				if err != nil {
					t.Fatalf("%s, %s, %s: %v", dl.Name, sh.Name, e.Name, err)
				}
				roles := 0
				if e.Args != "none" {
					roles = len(strings.Split(e.Args, ", "))
				}
				if n != roles {
					t.Errorf("%s, %s, %s: %d placeholders, %d roles (%s): %s", dl.Name, sh.Name, e.Name, n, roles, e.Args, e.SQL)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no statement with its parameters' roles checked")
	}
}

// TestSwappedArgsShowInGolden: a lease ack lists the id before the token (its Guard binds them
// so); a statement that listed them swapped would have another golden entry, and would bind the
// token where the id stands.
func TestSwappedArgsShowInGolden(t *testing.T) {
	s, lease, _ := quoted(t, dialect.Postgres[isolation.Default]{}, golden.Shapes[0])
	ack := s.Lease(lease).Settle(outcome.KindAck, sqltext.ByIDAndToken())
	if got, want := ack.ArgList(), "at, id, token"; got != want {
		t.Fatalf("the lease ack's roles are %q, want %q: %s", got, want, ack.SQL)
	}
	v := &sqltext.Values{At: "now", IDs: []int64{7}, Tokens: []any{"tok"}}
	got := ack.Bind(nil, v)
	if want := []any{"now", int64(7), "tok"}; !slices.Equal(got, want) {
		t.Fatalf("bound %v, want %v", got, want)
	}
	swapped := ack
	swapped.Args = []sqltext.Arg{sqltext.ArgAt, sqltext.ArgToken, sqltext.ArgID}
	entry := func(st sqltext.Statement) golden.Entry {
		return golden.Entry{Name: "ack", SQL: st.SQL, Args: st.ArgList()}
	}
	if entry(swapped) == entry(ack) {
		t.Fatal("a swap of the id and the token leaves the golden entry as it was")
	}
	if b := swapped.Bind(nil, v); slices.Equal(b, got) {
		t.Fatalf("the swapped statement binds %v, as the builder's does", b)
	}
}

// placeholders counts query's parameters outside its quoted names and literals: the ? or, where
// they are numbered, the $n.
func placeholders(c *dialect.Caps, query string) (int, error) {
	shape, _, _, err := sqlshape.Split(query, c.Quote)
	if err != nil {
		return 0, err
	}
	if c.NumberedParams {
		return strings.Count(shape, "$"), nil
	}
	return strings.Count(shape, "?"), nil
}
