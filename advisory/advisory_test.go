package advisory

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

func TestKeyTemplate(t *testing.T) {
	jobs := inbox.Table{Name: "jobs", ID: "id"}
	for _, tc := range []struct{ key, postgres, mysql string }{
		{"jobs-{id}", `'jobs-' || COALESCE(CAST("id" AS TEXT), '')`, "CONCAT('jobs-', COALESCE(CAST(`id` AS CHAR), ''))"},
		{"{account}", `COALESCE(CAST("account" AS TEXT), '')`, "CONCAT(COALESCE(CAST(`account` AS CHAR), ''))"},
		{"a:{x}/{y}.", `'a:' || COALESCE(CAST("x" AS TEXT), '') || '/' || COALESCE(CAST("y" AS TEXT), '') || '.'`,
			"CONCAT('a:', COALESCE(CAST(`x` AS CHAR), ''), '/', COALESCE(CAST(`y` AS CHAR), ''), '.')"},
		{"jobs", `'jobs'`, "CONCAT('jobs')"},
	} {
		pg, err := parseKey(dialect.Postgres[isolation.Default]{}, "jobs", tc.key)
		if err != nil {
			t.Fatalf("%q: %v", tc.key, err)
		}
		my, err := parseKey(dialect.MySQL[isolation.Default]{}, "jobs", tc.key)
		if err != nil {
			t.Fatalf("%q: %v", tc.key, err)
		}
		if got := keySQL(true, pg); got != tc.postgres {
			t.Errorf("%q on Postgres renders %s, want %s", tc.key, got, tc.postgres)
		}
		if got := keySQL(false, my); got != tc.mysql {
			t.Errorf("%q on MySQL renders %s, want %s", tc.key, got, tc.mysql)
		}
	}

	for _, tc := range []struct{ key, why string }{
		{"", "empty"},
		{"jobs-{id", "not closed"},
		{"jobs-id}", "closes no"},
		{"jobs-{a{id}}", "not closed"},
		{"jobs-{}", "empty braces"},
		{"it's-{id}", "quote"},
		{`a\b-{id}`, "backslash"},
		{"a\x00-{id}", "NUL"},
	} {
		_, err := New(dialect.Postgres[isolation.Default]{}, jobs, tc.key)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.key)) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("template %q: %v, want an error naming the template and saying %q", tc.key, err, tc.why)
		}
	}
	long := "jobs-{" + strings.Repeat("x", 64) + "}"
	if _, err := New(dialect.Postgres[isolation.Default]{}, jobs, long); !errors.Is(err, inbox.ErrSchema) {
		t.Errorf("a column name Postgres would truncate: %v, want ErrSchema", err)
	}
}

// TestTxOptions: the delivery's transaction begins on the locked connection at the level the
// dialect's own Begin would use.
