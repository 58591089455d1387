package inbox

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

func TestRowArgs(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)
	full := Table{
		Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt", Queue: "grp",
		Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
	}
	m := Message{ID: 7, Queue: "mail", Payload: []byte("hi"), Priority: 2, Headers: map[string]string{"k": "v"}, Delay: time.Second}

	row, err := rowArgs(full, dialect.SQLite[isolation.Default]{}, m, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(7), []byte("hi"), "mail", 2, `{"k":"v"}`, "2025-03-04 05:06:08.123456"}
	if !equalArgs(row, want) {
		t.Errorf("rowArgs = %#v, want %#v (id, payload, group, priority, headers, retry_after)", row, want)
	}

	undelayed := m
	undelayed.Delay, undelayed.Headers = 0, nil
	gen := full
	gen.IDGenerated = true
	row, err = rowArgs(gen, dialect.Postgres[isolation.Default]{}, undelayed, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{[]byte("hi"), "mail", 2, nil, nil}; !equalArgs(row, want) {
		t.Errorf("generated id, no headers, no delay: rowArgs = %#v, want %#v", row, want)
	}

	_, err = rowArgs(Table{Name: "jobs", ID: "job_id"}, dialect.Postgres[isolation.Default]{}, Message{Payload: []byte("x")}, now)
	if err == nil {
		t.Fatal("a message without ID for a table whose id is not generated was accepted")
	}
	for _, m := range []string{`"jobs"`, `"job_id"`, "Message.ID", "IDGenerated"} {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("missing ID: %q does not name %s", err, m)
		}
	}

	_, err = rowArgs(Table{Name: "jobs", ID: "id", IDGenerated: true}, dialect.Postgres[isolation.Default]{}, Message{Delay: time.Minute}, now)
	if err == nil {
		t.Fatal("a delayed message for a table without RetryAfter was accepted")
	}
	for _, m := range []string{`"jobs"`, "RetryAfter", "Delay"} {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("delay without RetryAfter: %q does not name %s", err, m)
		}
	}
}

func equalArgs(got, want []any) bool {
	return len(got) == len(want) && slices.EqualFunc(got, want, func(g, w any) bool {
		if gb, ok := g.([]byte); ok {
			wb, ok := w.([]byte)
			return ok && string(gb) == string(wb)
		}
		return g == w
	})
}

// recordingTx records the statements published through it.
type recordingTx struct {
	queries []string
	args    [][]any
}

func (r *recordingTx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	r.queries = append(r.queries, query)
	r.args = append(r.args, args)
	return nil, nil
}

func (r *recordingTx) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("recordingTx: no queries")
}

func (r *recordingTx) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }

func TestEnqueueTxStatements(t *testing.T) {
	ctx := context.Background()
	tbl := Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Queue: "grp", Notify: true}
	msgs := []Message{{Queue: "a", Payload: []byte("1")}, {Queue: "b", Payload: []byte("2")}}

	var pg recordingTx
	if err := EnqueueTx(ctx, &pg, dialect.Postgres[isolation.Default]{}, tbl, msgs...); err != nil {
		t.Fatal(err)
	}
	// Asked to (Notify), the one statement on Postgres notifies the table's channel too.
	want := []string{`WITH published AS (INSERT INTO "jobs" ("payload", "grp") VALUES ($1, $2), ($3, $4)) SELECT pg_notify($5, '')`}
	if !slices.Equal(pg.queries, want) {
		t.Errorf("Postgres statements %q, want %q", pg.queries, want)
	}
	if wantArgs := []any{[]byte("1"), "a", []byte("2"), "b", "inbox.jobs"}; len(pg.args) != 1 || !equalArgs(pg.args[0], wantArgs) {
		t.Errorf("Postgres arguments %#v, want %#v", pg.args, wantArgs)
	}

	var my recordingTx
	own := Table{Name: "jobs", ID: "id", Payload: "payload"}
	if err := EnqueueTx(ctx, &my, dialect.MySQL[isolation.Default]{}, own, Message{ID: 1}, Message{ID: 2}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"INSERT INTO `jobs` (`id`, `payload`) VALUES (?, ?), (?, ?)"}; !slices.Equal(my.queries, want) {
		t.Errorf("MySQL statements %q, want %q", my.queries, want)
	}

	// A batch over maxBatchRows goes in several statements, none over the limit; the last
	// notifies, once.
	var big recordingTx
	many := make([]Message, maxBatchRows+1)
	if err := EnqueueTx(ctx, &big, dialect.Postgres[isolation.Default]{}, tbl, many...); err != nil {
		t.Fatal(err)
	}
	if len(big.queries) != 2 || len(big.args[0]) != 2*maxBatchRows || len(big.args[1]) != 3 {
		t.Errorf("%d messages went in %d statements with %d and %d arguments, want %d and 3", len(many), len(big.queries), len(big.args[0]), len(big.args[1]), 2*maxBatchRows)
	}
	if strings.Contains(big.queries[0], "pg_notify") || !strings.HasSuffix(big.queries[1], "VALUES ($1, $2)) SELECT pg_notify($3, '')") {
		t.Errorf("the second statement numbers its parameters from 1: %s", big.queries[1])
	}

	// Nothing to publish runs nothing.
	var none recordingTx
	if err := EnqueueTx(ctx, &none, dialect.Postgres[isolation.Default]{}, tbl); err != nil || len(none.queries) != 0 {
		t.Errorf("publishing no message ran %q, %v", none.queries, err)
	}
	// A bad description fails before any statement runs.
	var bad recordingTx
	if err := EnqueueTx(ctx, &bad, dialect.Postgres[isolation.Default]{}, Table{Name: "jobs"}, msgs...); !errors.Is(err, ErrSchema) || len(bad.queries) != 0 {
		t.Errorf("a description without ID: ran %q, %v; want ErrSchema and nothing run", bad.queries, err)
	}
}
