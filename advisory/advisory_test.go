package advisory

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/isolation"
)

// keyExpr is the key expression internal/sqltext writes for parts over table jobs on d, read
// out of the statement that checks it.
func keyExpr(t testing.TB, d dialect.Dialect, parts []sqltext.KeyPart) string {
	t.Helper()
	q, err := inbox.Table{Name: "jobs", ID: "id"}.Quote(d)
	if err != nil {
		t.Fatal(err)
	}
	check := sqltext.New(d.Caps(), sqltext.Table(q)).Advisory(parts).KeyCheck()
	return strings.TrimSuffix(strings.TrimPrefix(check, "SELECT "), " FROM "+q.Name+" WHERE 1 = 0")
}

func TestKeyTemplate(t *testing.T) {
	pg, my := dialect.Postgres[isolation.Default]{}, dialect.MySQL[isolation.Default]{}
	for _, tc := range []struct{ key, postgres, mysql string }{
		{"jobs-{id}", `'jobs-' || COALESCE(CAST("id" AS TEXT), '')`, "CONCAT('jobs-', COALESCE(CAST(`id` AS CHAR), ''))"},
		{"{account}", `COALESCE(CAST("account" AS TEXT), '')`, "CONCAT(COALESCE(CAST(`account` AS CHAR), ''))"},
		{"a:{x}/{y}.", `'a:' || COALESCE(CAST("x" AS TEXT), '') || '/' || COALESCE(CAST("y" AS TEXT), '') || '.'`,
			"CONCAT('a:', COALESCE(CAST(`x` AS CHAR), ''), '/', COALESCE(CAST(`y` AS CHAR), ''), '.')"},
		{"jobs", `'jobs'`, "CONCAT('jobs')"},
	} {
		pgParts, err := parseKey(pg, "jobs", tc.key)
		if err != nil {
			t.Fatalf("%q: %v", tc.key, err)
		}
		myParts, err := parseKey(my, "jobs", tc.key)
		if err != nil {
			t.Fatalf("%q: %v", tc.key, err)
		}
		if got := keyExpr(t, pg, pgParts); got != tc.postgres {
			t.Errorf("%q on Postgres renders %s, want %s", tc.key, got, tc.postgres)
		}
		if got := keyExpr(t, my, myParts); got != tc.mysql {
			t.Errorf("%q on MySQL renders %s, want %s", tc.key, got, tc.mysql)
		}
	}

	for _, tc := range []struct{ key, why string }{
		{"jobs-{id", "not closed"},
		{"jobs-id}", "closes no"},
		{"jobs-{a{id}}", "not closed"},
		{"jobs-{}", "empty braces"},
		{"it's-{id}", "quote"},
		{`a\b-{id}`, "backslash"},
		{"a\x00-{id}", "NUL"},
	} {
		_, err := parseKey(pg, "jobs", tc.key)
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.key)) || !strings.Contains(err.Error(), `table "jobs"`) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("template %q: %v, want ErrSchema naming the table and the template and saying %q", tc.key, err, tc.why)
		}
	}
	long := "jobs-{" + strings.Repeat("x", 64) + "}"
	if _, err := parseKey(pg, "jobs", long); !errors.Is(err, inbox.ErrSchema) {
		t.Errorf("a column name Postgres would truncate: %v, want ErrSchema", err)
	}
}

// TestDefaultKey: without a key, each row is locked on the table's name, a dash and its id,
// and the name's characters a template's text cannot hold become underscores, so that the
// default parses whatever the table is called.
func TestDefaultKey(t *testing.T) {
	pg := dialect.Postgres[isolation.Default]{}
	jobs := inbox.Table{Name: "jobs", ID: "job_id"}
	for _, cfg := range []*Config{nil, {}} {
		if got := New(pg, jobs, cfg).template; got != "jobs-{job_id}" {
			t.Errorf("New(%+v): key %q, want %q", cfg, got, "jobs-{job_id}")
		}
	}
	if got := New(pg, jobs, &Config{Key: "accounts-{account}"}).template; got != "accounts-{account}" {
		t.Errorf("a key given: %q, want it kept", got)
	}
	odd := inbox.Table{Name: "it's {a}\\b\x00", ID: `id "x"`}
	key := New(pg, odd, nil).template
	if want := `it_s _a__b_-{id "x"}`; key != want {
		t.Errorf("the default key of table %q: %q, want %q", odd.Name, key, want)
	}
	if _, err := parseKey(pg, odd.Name, key); err != nil {
		t.Errorf("the default key of table %q does not parse: %v", odd.Name, err)
	}
}
