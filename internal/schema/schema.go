// Package schema checks an inbox table's columns against the roles a description names them
// for: it reads the table's columns from the database's catalog (Read) and checks the type of
// each role's column (Check), one result per column, so that a form can refuse a table whose
// types break it (Verify, which every form calls at Open) and a command can print the check
// column by column.
//
// A type is refused where it breaks the form, not where it merely differs from the types the
// README shows: an id, attempt or priority that is not an integer; a processed_at, retry_after
// or lease column that is not a timestamp (on SQLite, one that cannot hold the library's text);
// a lease column that drops microseconds, since the lease token is compared to the microsecond;
// a queue or kind column that is not text; a payload that is neither bytes nor text; headers that are not
// text. A queue, kind, unique or group key column that compares text inexactly fails the check
// too, and Open warns of it (see Verify).
//
// The rule for every text column the library compares by key, in the job table (queue, kind,
// unique key, group key) and in every side table it creates (table names, queues, group keys,
// schedule names, and whatever a new side table keys by): on MySQL and MariaDB declare it
// sqltext.KeyText, which compares byte for byte, trailing spaces included; a job table's column
// is a keyed role (keyed), which the checks flag where its collation does not compare exactly.
// The servers' default collations ignore case and trailing spaces (utf8mb4_general_ci,
// utf8mb4_uca1400_ai_ci; utf8mb4_bin ignores trailing spaces): a consumer of kind "alpha" would
// claim rows of "Alpha" and "alpha ", one of queue "Billing" the rows of "billing". Postgres's
// deterministic collations and SQLite's BINARY compare exactly already.
package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Role is what a column is for.
type Role int

// The roles, as inbox.Table names them, and the lease form's column.
const (
	ID Role = iota
	Payload
	Attempt
	ProcessedAt
	Queue
	Kind
	Priority
	RetryAfter
	Headers
	DeadAt
	LastError
	CreatedAt
	UniqueKey
	CancelledAt
	GroupKey
	LimitKey
	Lease
)

func (r Role) String() string {
	return [...]string{"ID", "Payload", "Attempt", "ProcessedAt", "Queue", "Kind", "Priority", "RetryAfter", "Headers", "DeadAt", "LastError", "CreatedAt", "UniqueKey", "CancelledAt", "GroupKey", "LimitKey", "lease column"}[r]
}

// Named is a column a description names, by its role.
type Named struct {
	Role   Role
	Column string
}

// Describe lists the columns of t by role, in the order of inbox.Table's fields, and the lease
// form's column when lease is not empty.
func Describe(t inbox.Table, lease string) []Named {
	var out []Named
	for _, n := range []Named{
		{ID, t.ID}, {Payload, t.Payload}, {Attempt, t.Attempt}, {ProcessedAt, t.ProcessedAt},
		{Queue, t.Queue}, {Kind, t.Kind}, {Priority, t.Priority}, {RetryAfter, t.RetryAfter}, {Headers, t.Headers},
		{DeadAt, t.DeadAt}, {LastError, t.LastError}, {CreatedAt, t.CreatedAt}, {UniqueKey, t.UniqueKey}, {CancelledAt, t.CancelledAt}, {GroupKey, t.GroupKey}, {LimitKey, t.LimitKey}, {Lease, lease},
	} {
		if n.Column != "" {
			out = append(out, n)
		}
	}
	return out
}

// Result is the check of one column.
type Result struct {
	Named
	// Has is the column's type as the catalog shows it (on SQLite, the declared type and its
	// affinity); empty when the table has no such column.
	Has string
	// Problem says why the type does not fit the role; empty when it fits.
	Problem string
	// Needs says what the role needs, on this database.
	Needs string
	// Fix is the statement that makes the column fit (on SQLite, where a column's type cannot
	// change, how to rebuild the table); empty when it fits.
	Fix string
	// Inexact says the column's type fits its role but compares text inexactly (Problem says
	// how: a collation that ignores case or trailing spaces): the checks fail, and Open warns
	// rather than refusing a table that ran before.
	Inexact bool
}

// OK reports whether the column fits its role.
func (r Result) OK() bool { return r.Problem == "" }

// String says what the check found, in a sentence that names the column, its role, its type,
// what the role needs and the statement that fixes it.
func (r Result) String() string {
	head := fmt.Sprintf("column %q (%s)", r.Column, r.Role)
	switch {
	case r.OK():
		return fmt.Sprintf("%s is %s: fits", head, r.Has)
	case r.Has == "":
		return fmt.Sprintf("%s %s: %s", head, r.Problem, r.Fix)
	}
	return fmt.Sprintf("%s is %s, %s; it needs %s: %s", head, r.Has, r.Problem, r.Needs, r.Fix)
}

// Check checks each of cols against the columns of tbl as read from d's database, in the order
// given. A column the table lacks fails with a Problem of "is missing" (so does every column of
// a table the catalog does not list).
func Check(d dialect.Dialect, tbl Table, cols []Named) []Result {
	rules := rulesOf(d)
	quoted, _ := d.Quote(tbl.Name)
	out := make([]Result, len(cols))
	for i, n := range cols {
		r := Result{Named: n, Needs: rules.needs(n.Role)}
		c, ok := tbl.column(n.Column, d.Caps().CaseSensitiveNames)
		col, _ := d.Quote(n.Column)
		if !ok {
			r.Problem = "is missing"
			r.Fix = add(d, quoted, col, n.Role)
			out[i] = r
			continue
		}
		r.Has = c.shown()
		if r.Problem = rules.fits(n.Role, c, tbl.Strict); r.Problem == "" {
			r.Problem = rules.exact(n.Role, c)
			r.Inexact = r.Problem != ""
		}
		if r.Problem != "" {
			r.Fix = rules.fix(quoted, col, n.Role, c)
		}
		out[i] = r
	}
	return out
}

// Verify reads table t from db and checks the type of every column t names (and the lease
// column, when lease is not empty). It fails with an error wrapping inbox.ErrSchema that names
// the table and, for each column that does not fit, its role, its type, what the role needs
// and the statement that fixes it. Columns the table lacks, and tables the catalog does not
// list (MySQL and MariaDB keep temporary tables out of information_schema), are left to the
// statements the form prepares, whose errors name them. Where t has a unique key it also checks
// the key's scope against the form (UniqueWhileQueued needs the lease form's column) and that
// the key's unique index (UniqueIndex) is there, naming the statement that creates it. A keyed
// column (queue, kind, unique or group key) that compares inexactly, of a collation that
// ignores case or trailing spaces, is logged as a warning to q.Logger with its fix, not refused:
// tables created before inbox schema declared an exact collation ran with it, and refusing them
// would stop every consumer at an upgrade; inbox schema -check fails on it.
func Verify(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table, lease string, q inbox.Binding) error {
	if err := leaseOnly(t, lease); err != nil {
		return err
	}
	return verifyColumns(ctx, db, d, t, lease, q)
}

// verifyColumns is Verify past the check of what only the lease form gives (leaseOnly).
func verifyColumns(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table, lease string, q inbox.Binding) error {
	tbl, err := Read(ctx, db, d, t.Name)
	if err != nil {
		return sentinel.Errorf(nil, sentinel.Table(t.Name), "reading its columns' types: %w", err)
	}
	if !tbl.Found {
		return nil
	}
	if err := verifyCancels(ctx, db, d, t); err != nil {
		return err
	}
	if err := fitKinds(d, tbl, t, q.Kinds); err != nil {
		return err
	}
	if err := hasUniqueIndex(ctx, db, d, t); err != nil {
		return err
	}
	return columnsFit(d, tbl, t, lease, q)
}

// leaseOnly refuses, where the form is not the lease form (lease empty), a description that
// asks for what only the lease form gives: FIFO groups, concurrency limits, rate limits, a
// unique key held only while queued.
func leaseOnly(t inbox.Table, lease string) error {
	if lease != "" {
		return nil
	}
	if t.GroupKey != "" {
		return sentinel.Errorf(inbox.ErrSchema, sentinel.Column(t.Name, t.GroupKey), "FIFO groups (inbox.Table.GroupKey) are built for the lease form so far: hold this table with lease.New, or leave GroupKey empty")
	}
	if t.Limits != "" {
		return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "concurrency limits (inbox.Table.Limits) are built for the lease form so far, whose slots live exactly as long as a row's lease: hold this table with lease.New, or leave Limits empty")
	}
	if t.Rates != "" {
		return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "rate limits (inbox.Table.Rates) are built for the lease form so far, whose claim takes a start slot in its own transaction: hold this table with lease.New, or leave Rates empty")
	}
	if t.UniqueWhileQueued {
		return sentinel.Errorf(inbox.ErrSchema, sentinel.Column(t.Name, t.UniqueKey), "UniqueWhileQueued clears the unique key when a row is claimed, which only the lease form's claim can do (it commits an UPDATE of the row); the row lock and advisory forms write nothing to a row they hold until it settles: take the lease form, or leave UniqueWhileQueued unset to hold the key while the row is queued or in work")
	}
	return nil
}

// columnsFit fails with ErrSchema where a column of t does not fit its role, and logs to
// q.Logger, without failing, a keyed column that compares text inexactly (see Verify).
func columnsFit(d dialect.Dialect, tbl Table, t inbox.Table, lease string, q inbox.Binding) error {
	var wrong []string
	for _, r := range Check(d, tbl, Describe(t, lease)) {
		switch {
		case r.Inexact && q.Logger != nil:
			q.Logger.Warn("inbox: a key column compares text inexactly; run its fix (inbox schema -check lists every such column)",
				"table", t.Name, "queue", q.Name, "column", r.Column, "role", r.Role.String(), "type", r.Has, "problem", r.Problem, "fix", r.Fix)
		case !r.OK() && r.Has != "" && !r.Inexact:
			wrong = append(wrong, r.String())
		}
	}
	switch len(wrong) {
	case 0:
		return nil
	case 1:
		return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "%s", wrong[0])
	}
	return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "%d columns do not fit their roles:\n%s", len(wrong), strings.Join(wrong, "\n"))
}

// verifyCancels checks, where t has a CancelledAt column, that the table of cancel requests is
// there, which every claim reads (sqltext.SQL.Due): a missing inbox_cancels, or one whose columns
// differ, fails with ErrSchema naming the statement that creates it. A connection that fails is
// the connection's error.
func verifyCancels(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table) error {
	if t.CancelledAt == "" {
		return nil
	}
	rows, err := db.QueryContext(ctx, sqltext.SQL{}.Cancels("").Check().SQL)
	if err == nil {
		err = rows.Close()
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil || dialect.ConnectionFailed(err):
		return sentinel.Errorf(nil, sentinel.Table(t.Name), "checking the cancel requests' table %s: %w", sqltext.CancelsTable, err)
	}
	return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "a table with a CancelledAt column needs the cancel requests' table %s, which the database refuses (%v): create it with `inbox schema -cancels -apply`, or run: %s",
		sqltext.CancelsTable, err, sqltext.CreateCancels(d.Caps()))
}

// fitKinds refuses a kind the table's kind column cannot hold: longer than the characters its
// type allows (VARCHAR(n), CHAR(n)), or the bytes (VARBINARY(n), MySQL's exact kind column),
// which the database would refuse or cut at the publish, where the claims, naming the kind in
// full, would never find it.
func fitKinds(d dialect.Dialect, tbl Table, t inbox.Table, kinds []inbox.ClaimedKind) error {
	if t.Kind == "" || len(kinds) == 0 {
		return nil
	}
	c, ok := tbl.column(t.Kind, d.Caps().CaseSensitiveNames)
	if !ok {
		return nil
	}
	n, ok := charLimit(c.Type)
	if !ok {
		return nil
	}
	length, unit := utf8.RuneCountInString, "characters"
	if c.Base == "varbinary" {
		length, unit = func(s string) int { return len(s) }, "bytes"
	}
	for _, k := range kinds {
		if l := length(k.Kind); l > n {
			return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "kind %q has %d %s, and its kind column %q (%s) holds %d: shorten the kind, or widen the column", k.Kind, l, unit, t.Kind, c.Type, n)
		}
	}
	return nil
}

// charLimit is the characters a text type of a given length holds (varchar(64), character
// varying(64), char(8)), or the bytes of a varbinary(764), and whether it has one.
func charLimit(typ string) (int, bool) {
	open, end := strings.IndexByte(typ, '('), strings.IndexByte(typ, ')')
	base := strings.ToLower(typ)
	if open < 0 || end < open || !strings.Contains(base, "char") && !strings.HasPrefix(base, "varbinary") {
		return 0, false
	}
	n, err := strconv.Atoi(typ[open+1 : end])
	return n, err == nil
}

// hasUniqueIndex refuses a table with a unique key column but no index named t.UniqueIndex() on
// that column: without it nothing excludes a second row of a key, and on MySQL and MariaDB
// publishing tells the key taken by a duplicate on that index's name.
func hasUniqueIndex(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table) error {
	if t.UniqueKey == "" {
		return nil
	}
	indexes, err := ReadIndexes(ctx, db, d, t.Name)
	if err != nil {
		return sentinel.Errorf(nil, sentinel.Table(t.Name), "reading its indexes: %w", err)
	}
	for name, cols := range indexes {
		if name == t.UniqueIndex() && len(cols) == 1 && cols[0] == t.UniqueKey {
			return nil
		}
	}
	create, err := UniqueIndex(d, t)
	if err != nil {
		return err
	}
	if !d.Caps().PartialIndexes {
		q, _ := d.Quote(t.Name) // quoted by UniqueIndex already
		create = "ALTER TABLE " + q + " ADD " + create
	}
	return sentinel.Errorf(inbox.ErrSchema, sentinel.Column(t.Name, t.UniqueKey), "the unique key column has no unique index named %q on it alone, which excludes a second row of a key: create it with %s", t.UniqueIndex(), create)
}
