package sqlmocktests

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/rowlock"
)

// TestOpenErrorsNameTableAndQueueOnce: the errors Open passes on from the dialect (a pair the
// database cannot run, a server too old) name the table and the queue, each once, and carry the
// library's "inbox:" prefix once, in every form.
func TestOpenErrorsNameTableAndQueueOnce(t *testing.T) {
	const queue = "billing"
	tbl := minimalShape.table
	runtimeSQLite, err := dialect.Parse("sqlite", "")
	if err != nil {
		t.Fatal(err)
	}
	oldMySQL := func(m *recorder) { expectVersion(m, "mysql", "5.7.44") }
	advisoryForm := func(d advisory.Dialect) inbox.Form {
		return advisory.New(d, tbl, &advisory.Config{Key: minimalShape.key})
	}
	for _, c := range []struct {
		name   string
		form   inbox.Form
		server func(*recorder)
		want   error
	}{
		{"rowlock on runtime SQLite", rowlock.New(runtimeSQLite, tbl), nil, inbox.ErrDialect},
		{"advisory on runtime SQLite", advisoryForm(runtimeSQLite), nil, inbox.ErrDialect},
		{"rowlock on MySQL 5.7", rowlock.New(dialect.MySQL[isolation.Default]{}, tbl), oldMySQL, inbox.ErrServerTooOld},
		{"lease on MySQL 5.7", lease.New(dialect.MySQL[isolation.Default]{}, tbl, nil), oldMySQL, inbox.ErrServerTooOld},
		{"advisory on MySQL 5.7", advisoryForm(dialect.MySQL[isolation.Default]{}), oldMySQL, inbox.ErrServerTooOld},
		{"advisory on Postgres 10", advisoryForm(dialect.Postgres[isolation.Default]{}), func(m *recorder) {
			expectVersion(m, "postgres", "100023")
			expectVersion(m, "postgres", "100023")
		}, inbox.ErrServerTooOld},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newRecorder(t, 0)
			if c.server != nil {
				c.server(m)
			}
			_, err := c.form.Open(context.Background(), m.db, inbox.Queue{Name: queue})
			if !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want %v", err, c.want)
			}
			msg := err.Error()
			for _, want := range []string{`table "jobs"`, `queue "billing"`, "inbox:"} {
				if n := strings.Count(msg, want); n != 1 {
					t.Errorf("%q appears %d times in %q, want once", want, n, msg)
				}
			}
		})
	}
}
