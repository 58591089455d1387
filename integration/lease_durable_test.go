package integration

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// postgresBackend is the Postgres backend; the test is skipped (or fails, where databases are
// required) without a server.
func postgresBackend(t *testing.T) backend {
	t.Helper()
	for _, b := range backends(t, false) {
		if b.name == "postgres" {
			return b
		}
	}
	t.Fatal("no postgres backend")
	return backend{}
}

// leaseSQL is the lease form's statement builder over tbl on b, as the form quotes it.
func leaseSQL(t *testing.T, b backend, tbl inbox.Table) sqltext.Lease {
	t.Helper()
	return formSQL(t, b, tbl).Lease(b.q(t, "locked_until"))
}

// syncCommitAfter runs query with args inside an explicit transaction, which then commits, and
// returns the ids of the rows it returned (a statement with RETURNING: each row starts with its
// id), how many rows it returned or changed, and synchronous_commit as the transaction saw it
// after the statement. It fails the test when synchronous_commit was not on before.
func syncCommitAfter(t *testing.T, db *sql.DB, query string, args ...any) (ids []int64, changed int64, setting string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "on" {
		t.Fatalf("synchronous_commit %q before the statement (%v), want on", setting, err)
	}
	if strings.Contains(query, "RETURNING") {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		for rows.Next() {
			var id int64
			cols, err := rows.Columns()
			if err != nil {
				t.Fatal(err)
			}
			dest := []any{&id}
			for range cols[1:] {
				dest = append(dest, new(any))
			}
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		changed = int64(len(ids))
	} else {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if changed, err = res.RowsAffected(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ids, changed, setting
}

// TestLeaseUnflushedCommit: on Postgres the lease form's claim and extension turn
// synchronous_commit off for the transaction they run in (an autocommit statement's own; here an
// explicit one, whose setting can be read after the statement), whether or not they matched a
// row, and the claim still returns its rows in claim order; a settlement leaves it on, unless it
// was built Unflushed (Config.UnflushedAcks).
func TestLeaseUnflushedCommit(t *testing.T) {
	b := postgresBackend(t)
	db, tbl := b.openTable(t, 4, fullTable)
	for _, p := range []int{3, 1, 2, 1, 0} { // ids 1 to 5
		b.enqueue(t, db, tbl, inbox.Message{Queue: "q", Priority: p})
	}
	l := leaseSQL(t, b, tbl)
	tm := b.dialect.Time
	now := time.Now()
	token := now.Add(time.Minute).UTC().Truncate(time.Microsecond)

	ids, _, setting := syncCommitAfter(t, db, l.Claim(3).SQL, tm(now), "q", tm(now), tm(token))
	if want := []int64{5, 2, 4}; !slices.Equal(ids, want) {
		t.Errorf("the claim of 3 returned %v, want %v (priority, then id)", ids, want)
	}
	if setting != "off" {
		t.Errorf("after the claim synchronous_commit is %s, want off", setting)
	}
	if _, _, setting := syncCommitAfter(t, db, l.Claim(3).SQL, tm(now), "another queue", tm(now), tm(token)); setting != "off" {
		t.Errorf("after a claim that found nothing synchronous_commit is %s, want off", setting)
	}

	next := token.Add(time.Minute)
	for _, c := range []struct {
		what    string
		id      int64
		changed int64
	}{{"an extension", 5, 1}, {"an extension that found its lease lost", 1, 0}} {
		_, n, setting := syncCommitAfter(t, db, l.Extend(sqltext.ByIDAndToken()).SQL, tm(next), c.id, tm(token))
		if n != c.changed || setting != "off" {
			t.Errorf("%s changed %d rows (want %d), synchronous_commit %s after it, want off", c.what, n, c.changed, setting)
		}
	}

	if _, n, setting := syncCommitAfter(t, db, l.Settle(outcome.KindAck, sqltext.ByIDAndToken()).SQL, tm(now), int64(2), tm(token)); n != 1 || setting != "on" {
		t.Errorf("the ack changed %d rows (want 1), synchronous_commit %s after it, want on", n, setting)
	}

	// The acks Config.UnflushedAcks asks for: a row's, several holders' rows merged (row 1's
	// never claimed), a batch's (row 3, claimed now).
	if ids, _, _ := syncCommitAfter(t, db, l.Claim(1).SQL, tm(now), "q", tm(now), tm(token)); !slices.Equal(ids, []int64{3}) {
		t.Fatalf("the claim of 1 returned %v, want [3]", ids)
	}
	u := l.Unflushed()
	for _, c := range []struct {
		what  string
		query string
		args  []any
	}{
		{"an unflushed ack", u.Settle(outcome.KindAck, sqltext.ByIDAndToken()).SQL, []any{tm(now), int64(4), tm(token)}},
		{"unflushed acks merged", u.Settle(outcome.KindAck, sqltext.ByPairs(2)).SQL, []any{tm(now), int64(5), tm(next), int64(1), tm(token)}},
		{"a batch's unflushed ack", u.SettleReturning(outcome.KindAck, 2).SQL, []any{tm(now), int64(3), int64(3), tm(token)}},
	} {
		if _, n, setting := syncCommitAfter(t, db, c.query, c.args...); n != 1 || setting != "off" {
			t.Errorf("%s changed %d rows (want 1), synchronous_commit %s after it, want off", c.what, n, setting)
		}
	}
}

// TestLeaseClaimPlansOnce: on Postgres the claim, its limit in its text, is a prepared statement
// per size whose plan the server keeps (generic plans) instead of planning each execution
// again, as it did with a bound limit.
func TestLeaseClaimPlansOnce(t *testing.T) {
	b := postgresBackend(t)
	db, tbl := b.openTable(t, 1, fullTable) // one session: the form's statements and pg_prepared_statements share it
	for range 40 {
		b.enqueue(t, db, tbl, inbox.Message{Queue: "q"})
	}
	f := leaseForm(t, b, db, tbl, &lease.Config{Lease: time.Minute}, inbox.Binding{Name: "q", Logger: testLogger(t)})
	const runs = 10
	for _, n := range []int{1, 3} {
		for range runs {
			for _, d := range claimN(t, f, n, n) {
				release(t, f, d)
			}
		}
	}
	var (
		claims          int
		text            string
		generic, custom int64
	)
	forRows(t, db, "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'WITH inbox_lease_pick%' ORDER BY statement", nil, func() {
		claims++
		t.Logf("generic plans %d, custom plans %d: %s", generic, custom, text)
		if generic+custom != runs || generic < runs/2 {
			t.Errorf("the claim ran %d times, %d of them on a generic plan: want %d runs and the server's plan kept after the first custom ones", generic+custom, generic, runs)
		}
	}, &text, &generic, &custom)
	if claims != 2 {
		t.Errorf("%d claim statements prepared, want one per size (1 and 3)", claims)
	}
}
