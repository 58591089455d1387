package sqlmocktests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
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
			_, err := c.form.Open(context.Background(), m.db, inbox.Binding{Name: queue})
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

// TestRunRefusesMalformedKeyTemplate: an advisory key template Open cannot parse is the
// configuration's error, not the database's: Run returns at once with ErrSchema naming the
// table, the template and what to write instead, before any round trip (the mock expects none,
// and fails the test on any call), rather than trying Open again every poll interval until its
// context ends.
func TestRunRefusesMalformedKeyTemplate(t *testing.T) {
	for _, tc := range []struct{ key, why string }{
		{"jobs-{id", "not closed"},
		{"jobs-{}", "name a column inside them"},
		{"{id}}", "closes no"},
		{"jobs-id}", "closes no"},
		{"it's-{id}", "leave them out of the key"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			m := newRecorder(t, 0)
			form := advisory.New(dialect.Postgres[isolation.Default]{}, minimalShape.table, &advisory.Config{Key: tc.key})
			h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
			// A Run that tries Open again logs so, and is stopped there.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var log inboxtest.Log
			go func() {
				for ctx.Err() == nil && !log.Contains("trying again") {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}()
			err := inbox.NewConsumer(m.db, form, h, &inbox.Config{PollInterval: 10 * time.Millisecond, Logger: log.Logger(slog.LevelDebug)}).Run(ctx)
			if ctx.Err() != nil {
				t.Fatalf("Run tried Open again and returned %v once stopped, having logged:\n%s", err, log.String())
			}
			if !errors.Is(err, inbox.ErrSchema) {
				t.Fatalf("Run: %v, want ErrSchema", err)
			}
			msg := err.Error()
			for _, want := range []string{`table "jobs"`, fmt.Sprintf("%q", tc.key), tc.why} {
				if !strings.Contains(msg, want) {
					t.Errorf("Run: %q does not say %q", msg, want)
				}
			}
			if n := strings.Count(msg, "inbox:"); n != 1 {
				t.Errorf("Run: %q carries \"inbox:\" %d times, want once", msg, n)
			}
			if s := log.String(); s != "" {
				t.Errorf("Run logged, want nothing before it returned:\n%s", s)
			}
		})
	}
}
