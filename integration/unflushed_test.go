package integration

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
)

// formSQL is the statement builder over tbl on b, as the forms quote it.
func formSQL(t *testing.T, b backend, tbl inbox.Table) sqltext.SQL {
	t.Helper()
	q, err := tbl.Quote(b.dialect)
	if err != nil {
		t.Fatal(err)
	}
	return sqltext.New(b.dialect.Caps(), sqltext.Table(q))
}

// TestRowlockUnflushedCommit: on Postgres the row lock form's claim leaves synchronous_commit on
// in its transaction, and the settlement that shares the transaction decides: an ack built
// Unflushed (Config.UnflushedAcks), a row's or a batch's, turns it off for the whole
// transaction, even where it matched no row; the ack and the retry that wait leave it on.
func TestRowlockUnflushedCommit(t *testing.T) {
	b := postgresBackend(t)
	db, tbl := b.openTable(t, 4, fullTable)
	b.enqueue(t, db, tbl, messages("q", 5)...) // ids 1 to 5
	r := formSQL(t, b, tbl).RowLock()
	u := r.Unflushed()
	now := b.dialect.Time(time.Now())
	ctx := context.Background()
	for _, c := range []struct {
		what    string
		claim   int
		settle  string
		lead    []any // the arguments before the ids
		ids     []int64
		changed int64
		want    string
	}{
		{"an ack", 1, r.Settle(outcome.KindAck, sqltext.ByID()).SQL, []any{now}, []int64{1}, 1, "on"},
		{"an unflushed ack", 1, u.Settle(outcome.KindAck, sqltext.ByID()).SQL, []any{now}, []int64{2}, 1, "off"},
		{"a batch's unflushed ack", 2, u.Settle(outcome.KindAck, sqltext.ByIDs(2)).SQL, []any{now}, []int64{3, 4}, 2, "off"},
		{"an unflushed ack that matched no row", 1, u.Settle(outcome.KindAck, sqltext.ByID()).SQL, []any{now}, []int64{99}, 0, "off"},
		{"a retry", 1, r.Settle(outcome.KindRetry, sqltext.ByID()).SQL, nil, []int64{5}, 1, "on"},
	} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var claimed []int64
		var id int64
		var payload, attempt, grp, headers any
		forRows(t, tx, r.Claim(c.claim).SQL, []any{now, "q"}, func() { claimed = append(claimed, id) }, &id, &payload, &attempt, &grp, &headers)
		var setting string
		if err := tx.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "on" {
			t.Fatalf("%s: synchronous_commit %q after the claim (%v), want on", c.what, setting, err)
		}
		args := slices.Clone(c.lead)
		for _, id := range c.ids {
			args = append(args, id)
		}
		res, err := tx.ExecContext(ctx, c.settle, args...)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if c.changed > 0 && !slices.Equal(claimed, c.ids) {
			// The claims take the rows in id order, each case's rows the next ones.
			t.Fatalf("%s: the claim of %d returned %v, want %v", c.what, c.claim, claimed, c.ids)
		}
		if n != c.changed || setting != c.want {
			t.Errorf("%s changed %d rows (want %d), synchronous_commit %s after it, want %s", c.what, n, c.changed, setting, c.want)
		}
	}
}

// TestAdvisoryUnflushedCommit: on Postgres the advisory form's take, the UPDATE that counts the
// attempt, turns synchronous_commit off for its transaction (an autocommit statement's own;
// here an explicit one, whose setting can be read after the statement), whether or not it found
// the row; an ack leaves it on, unless it was built Unflushed (Config.UnflushedAcks), a row's or
// a batch's; a RetryAfter leaves it on.
func TestAdvisoryUnflushedCommit(t *testing.T) {
	b := postgresBackend(t)
	db, tbl := b.openTable(t, 4, fullTable)
	b.enqueue(t, db, tbl, messages("q", 5)...) // ids 1 to 5
	a := formSQL(t, b, tbl).Advisory([]sqltext.KeyPart{{Text: tbl.Name + "-"}, {Column: b.q(t, tbl.ID)}})
	key := func(id int64) string { return tbl.Name + "-" + strconv.FormatInt(id, 10) }
	tm := b.dialect.Time
	now := time.Now()

	ids, _, setting := syncCommitAfter(t, db, a.Take().SQL, int64(1), key(1), tm(now), "q")
	if !slices.Equal(ids, []int64{1}) || setting != "off" {
		t.Errorf("the take of row 1 returned %v (want [1]), synchronous_commit %s after it, want off", ids, setting)
	}
	if ids, _, setting := syncCommitAfter(t, db, a.Take().SQL, int64(2), key(3), tm(now), "q"); len(ids) != 0 || setting != "off" {
		t.Errorf("the take of row 2 under another key returned %v (want none), synchronous_commit %s after it, want off", ids, setting)
	}

	u := a.Unflushed()
	for _, c := range []struct {
		what  string
		query string
		args  []any
		want  string
	}{
		{"an ack", a.Settle(outcome.KindAck, sqltext.ByID()).SQL, []any{tm(now), int64(1)}, "on"},
		{"an unflushed ack", u.Settle(outcome.KindAck, sqltext.ByID()).SQL, []any{tm(now), int64(2)}, "off"},
		{"a batch's unflushed ack", u.Settle(outcome.KindAck, sqltext.ByIDs(2)).SQL, []any{tm(now), int64(3), int64(4)}, "off"},
		{"a retry after", a.Settle(outcome.KindRetryAfter, sqltext.ByID()).SQL, []any{tm(now.Add(time.Hour)), int64(5)}, "on"},
	} {
		if _, n, setting := syncCommitAfter(t, db, c.query, c.args...); n != int64(len(c.args)-1) || setting != c.want {
			t.Errorf("%s changed %d rows (want %d), synchronous_commit %s after it, want %s", c.what, n, len(c.args)-1, setting, c.want)
		}
	}
}
