// Package stmt runs what the forms share around their statements, whose text internal/sqltext
// builds: reading a delivery from a claimed row (Scan, ScanOne, in the order of
// sqltext.SQL.Columns), the values every claim binds (ClaimValues), the searches
// for rows no claim takes (FindUnclaimable), and the statements a form runs (Stmt), prepared or
// run by their text, checked at startup with an error that names the table and the statement
// (Statement).
package stmt

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlshape"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Table is a table description with its names quoted for one dialect.
type Table struct {
	D   dialect.Dialect
	Raw inbox.Table // as described, for messages
	Q   inbox.Table // every name quoted
	// Unprepared says the form runs its statements by their text, never prepared
	// (inbox.Binding.UnpreparedStatements): Statement then checks each by EXPLAIN.
	Unprepared bool
	// MaxAttempts is the attempt limit the form's claims honour (inbox.Binding.MaxAttempts,
	// sqltext.SQL.Limited); zero: none.
	MaxAttempts int
	// Kinds are the kinds the form's claims take, each below its limit (inbox.Binding.Kinds,
	// sqltext.SQL.OfKinds); none: every kind, below MaxAttempts.
	Kinds []inbox.ClaimedKind
}

// Claiming sets what the form's claims take and how it runs its statements, from the binding a
// consumer opens it with: its attempt limits, its kinds, and whether it prepares.
func (t *Table) Claiming(b inbox.Binding) {
	t.Unprepared, t.MaxAttempts, t.Kinds = b.UnpreparedStatements, b.MaxAttempts, b.Kinds
}

// SQL is the builder of the table's statements, its claims taking what Claiming set.
func (t *Table) SQL() sqltext.SQL {
	kinds := make([]sqltext.Kind, len(t.Kinds))
	for i, k := range t.Kinds {
		kinds[i] = sqltext.Kind{Name: k.Kind, MaxAttempts: k.MaxAttempts}
	}
	return sqltext.New(t.D.Caps(), sqltext.Table(t.Q)).Limited(t.MaxAttempts).OfKinds(kinds)
}

// limit is the attempt limit of a row of kind: its kind's, where the form claims by kind.
func (t *Table) limit(kind string) int {
	for _, k := range t.Kinds {
		if k.Kind == kind {
			return k.MaxAttempts
		}
	}
	return t.MaxAttempts
}

// New quotes t for d; errors wrap inbox.ErrSchema.
func New(d dialect.Dialect, t inbox.Table) (*Table, error) {
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	return &Table{D: d, Raw: t, Q: q}, nil
}

// Scan reads rows of the Columns list into deliveries and closes rows.
func (t *Table) Scan(rows *sql.Rows) ([]*inbox.Delivery, error) {
	defer rows.Close()
	var out []*inbox.Delivery
	for rows.Next() {
		d, err := t.ScanOne(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// scanned is a delivery and the scratch its row is scanned through, allocated together: a
// row costs one allocation (and the driver's), not one per column read.
type scanned struct {
	d                    inbox.Delivery
	attempt              sql.NullInt64
	group, kind, headers sql.NullString
	dest                 [6]any
}

// ScanOne reads one row of the Columns list through scan (a Rows.Scan or Row.Scan). The
// application's own columns, where the description names any, are scanned into one slice of
// values the delivery keeps (inbox.Column reads them); a table without them costs nothing more.
func (t *Table) ScanOne(scan func(...any) error) (*inbox.Delivery, error) {
	s := &scanned{}
	d, attempt, group, kind, headers := &s.d, &s.attempt, &s.group, &s.kind, &s.headers
	dest, vals := s.dest[:0], []any(nil)
	if n := len(t.Q.Columns); n > 0 {
		// One allocation holds the values, then the destinations that point at them.
		buf := make([]any, n+len(s.dest)+n)
		vals, dest = buf[:n:n], buf[n:n]
	}
	dest = append(dest, &d.ID)
	if t.Q.Payload != "" {
		dest = append(dest, &d.Payload)
	}
	if t.Q.Attempt != "" {
		dest = append(dest, attempt)
	}
	if t.Q.Queue != "" {
		dest = append(dest, group)
	}
	if t.Q.Kind != "" {
		dest = append(dest, kind)
	}
	if t.Q.Headers != "" {
		dest = append(dest, headers)
	}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	if err := scan(dest...); err != nil {
		return nil, err
	}
	if len(vals) > 0 {
		inbox.SetColumns(d, t.Raw.Name, t.Raw.Columns, vals)
	}
	d.Attempt = int(attempt.Int64)
	d.Queue, d.Kind = group.String, kind.String
	if headers.Valid && headers.String != "" {
		if err := json.Unmarshal([]byte(headers.String), &d.Headers); err != nil {
			// One bad row must not fail every claim of its queue: it is delivered, and the
			// consumer settles it by its undecodable-payload policy.
			d.Headers = nil
			d.Undecodable(sentinel.Errorf(nil, sentinel.Row(t.Raw.Name, d.ID), "headers column %q does not hold a JSON object of strings: %w", t.Raw.Headers, err))
		}
	}
	return d, nil
}

// ClaimValues are the values of the form's claims over queue that hold for every run: the queue's
// name and the table's name (the key of the pauses table, where the description names one, and
// of the cancel requests, where the table has a cancelled_at column); the kinds claimed are in
// the claims' text (sqltext.SQL.OfKinds). A run sets the rest (now, the limit) on a copy and
// binds it (sqltext.Statement.Bind).
func (t *Table) ClaimValues(queue string) sqltext.Values {
	return sqltext.Values{Queue: queue, Table: t.Raw.Name}
}

// BacksOff reports whether a settlement that failed with err is one a form backs off by the
// consumer's policy (inbox.Binding.Backoff): a failure of the rows' own, a statement the database
// refused (sentinel.BacksOff), and not a lost connection (dialect.ConnectionFailed), which
// returns the rows by the form's rule, as a crash does, their attempts not counted for it.
func BacksOff(err error) bool { return sentinel.BacksOff(err) && !dialect.ConnectionFailed(err) }

// DeathFailed is the error of d's death, the back-off of a failed settlement, that failed with
// err while the row's attempt column counts d.Attempt, where that is the attempt limit
// (MaxAttempts): it wraps inbox.ErrDeathFailed and says that the row stays where it is, and
// why no claim takes it again. Nil below the limit, or without one: the row is claimed again.
func (t *Table) DeathFailed(queue string, d *inbox.Delivery, err error) error {
	limit := t.limit(d.Kind)
	if t.Q.Attempt == "" || limit == 0 || d.Attempt < limit {
		return nil
	}
	how, remedy := "stamping "+strconv.Quote(t.Raw.DeadAt), "fix what refuses it"
	if t.Q.DeadAt == "" {
		how = "a DELETE, since the table has no DeadAt column"
		remedy = "name a DeadAt column (a nullable timestamp) in inbox.Table.DeadAt, so that a row that cannot be deleted can die, and fix what refuses the DELETE"
	}
	return sentinel.Errorf(inbox.ErrDeathFailed, "", "table %q, queue %q, row %d, attempt %d of %d: its death (%s) failed too: %w; %s; see docs/errors.md#death-failed", t.Raw.Name, queue, d.ID, d.Attempt, limit, how, err, remedy)
}

// farYears is how far ahead a retry_after reads as never: a row put off further is reported
// as unclaimable. A handler's backoff is seconds to days, and a row parked for a date to come
// (a yearly renewal) is parked for months or years; a century is beyond both and beyond any
// process now running, so what lies past it was written as a way of saying never (9999-12-31,
// Postgres's infinity), and the row will not run. A row that should not run belongs stamped or
// deleted, where it is seen as done.
const farYears = 100

// unclaimableLimit bounds each search for unclaimable rows: it reads at most one id more, to
// tell that the search stopped.
const unclaimableLimit = 1000

// unclaimableIDs is how many ids a report of unclaimable rows names.
const unclaimableIDs = 5

// unclaimableSearch is one search for a kind of unclaimable row: its statement and arguments.
type unclaimableSearch struct {
	why   string
	query string
	args  []any
}

// unclaimableSearches lists the searches for the kinds of row of queue that no claim takes as
// they stand, at now (see inbox.Unclaimable): a NULL queue, a retry_after more than farYears
// ahead, an attempt at the limit (MaxAttempts), and where timestamps are text (Caps.TimeLayout:
// SQLite, whose GLOB and typeof the search uses) a retry_after that is not text in the
// library's layout. Each is a SELECT of ids, bounded by a LIMIT, over the rows a claim would
// consider (not processed, of the queue): the claim index's leading columns.
func (t *Table) unclaimableSearches(queue string, now time.Time) []unclaimableSearch {
	u := t.SQL().Unclaimable(unclaimableLimit + 1)
	v := sqltext.Values{Queue: queue, Horizon: t.D.Time(now.AddDate(farYears, 0, 0))}
	done := "delete it"
	if t.Q.ProcessedAt != "" {
		done = "stamp " + strconv.Quote(t.Raw.ProcessedAt) + " (or delete the row)"
	}
	var out []unclaimableSearch
	if q := u.NullQueue(); !q.Empty() {
		out = append(out, unclaimableSearch{
			why:   fmt.Sprintf("the queue column %q is NULL, which no consumer's queue matches: set it to the queue that should run the row", t.Raw.Queue),
			query: q.SQL,
			args:  q.Bind(nil, &v),
		})
	}
	if q := u.FarAhead(); !q.Empty() {
		out = append(out, unclaimableSearch{
			why:   fmt.Sprintf("retry_after (column %q) is more than %d years ahead, a way of writing never: set it to NULL to run the row, or %s to end it", t.Raw.RetryAfter, farYears, done),
			query: q.SQL,
			args:  q.Bind(nil, &v),
		})
	}
	if q := u.Exhausted(); !q.Empty() {
		death := "a DELETE, since the table has no DeadAt column"
		if t.Q.DeadAt != "" {
			death = "stamping " + strconv.Quote(t.Raw.DeadAt)
		}
		out = append(out, unclaimableSearch{
			why: fmt.Sprintf("the attempt column %q has reached the consumer's MaxAttempts (%d) and the row did not settle: its consumer stopped or lost its connection during its last delivery, or that delivery's settlement failed and so did its death (%s), as the consumer logged then. Set the attempt to 0 to run the row again, or %s to end it",
				t.Raw.Attempt, t.MaxAttempts, death, done),
			query: q.SQL,
			args:  q.Bind(nil, &v),
		})
	}
	if q := u.BadLayout(); !q.Empty() {
		out = append(out, unclaimableSearch{
			why: fmt.Sprintf("retry_after (column %q) is not a time in the library's layout (%s, UTC), so it compares as text and may never come due: rewrite it in that layout, or set it to NULL to run the row",
				t.Raw.RetryAfter, t.D.Caps().TimeLayout),
			query: q.SQL,
			args:  q.Bind(nil, &v),
		})
	}
	return out
}

// FindUnclaimable runs the searches of unclaimableSearches on db and returns each kind found.
func (t *Table) FindUnclaimable(ctx context.Context, db *sql.DB, queue string, now time.Time) ([]inbox.Unclaimable, error) {
	var out []inbox.Unclaimable
	for _, s := range t.unclaimableSearches(queue, now) {
		ids, err := ReadIDs(ctx, db, s.query, s.args...)
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Queue(t.Raw.Name, queue), "searching for unclaimable rows: %w (statement: %s)", err, s.query)
		}
		if len(ids) == 0 {
			continue
		}
		u := inbox.Unclaimable{Why: s.why, Rows: min(len(ids), unclaimableLimit), More: len(ids) > unclaimableLimit}
		slices.Sort(ids)
		u.IDs = ids[:min(len(ids), unclaimableIDs)]
		out = append(out, u)
	}
	return out, nil
}

// ReadIDs runs query on db and returns the ids its rows hold, one column each.
func ReadIDs(ctx context.Context, db *sql.DB, query string, args ...any) ([]int64, error) {
	return ReadRows(ctx, db, func(scan func(...any) error) (int64, error) {
		var id int64
		err := scan(&id)
		return id, err
	}, query, args...)
}

// ReadRows runs query on db and reads each row it returns with read, which is given the row's
// Scan, in order.
func ReadRows[T any](ctx context.Context, db *sql.DB, read func(scan func(...any) error) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := read(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Stmt is a statement a form runs, checked against the server at Open: prepared on the pool,
// or only its text where the form runs its statements unprepared (Table.Unprepared), and then
// every run sends the text. Its methods run it either way, so that a form's call sites do not
// ask which; a prepared Stmt costs a run what its *sql.Stmt does.
type Stmt struct {
	db       *sql.DB
	text     string
	args     []sqltext.Arg // the roles of its parameters, in order (sqltext.Statement)
	prepared *sql.Stmt     // nil: the statement runs by its text
}

// ByText is query as a statement that runs by its text on db, unchecked: for a statement a form
// must run without waiting to prepare it, since preparing takes a connection of the pool (see
// the lease form's statements over id lists).
func ByText(db *sql.DB, query sqltext.Statement) *Stmt {
	return &Stmt{db: db, text: query.SQL, args: query.Args}
}

// Bind appends to dst the arguments of a run of the statement, v's values in the order of its
// parameters (sqltext.Statement.Bind), so that no caller orders them itself.
func (s *Stmt) Bind(dst []any, v *sqltext.Values) []any {
	return sqltext.Statement{SQL: s.text, Args: s.args}.Bind(dst, v)
}

// Text is the statement's text.
func (s *Stmt) Text() string { return s.text }

// Prepared reports whether the statement is prepared on the pool; if not, it runs by its text.
func (s *Stmt) Prepared() bool { return s.prepared != nil }

// ExecContext runs the statement on the pool. Its errors are as Failed makes them.
func (s *Stmt) ExecContext(ctx context.Context, args ...any) (res sql.Result, err error) {
	if s.prepared != nil {
		res, err = s.prepared.ExecContext(ctx, args...)
	} else {
		res, err = s.db.ExecContext(ctx, s.text, args...)
	}
	return res, s.Failed(err)
}

// QueryContext runs the statement on the pool and returns its rows. Its errors are as Failed
// makes them.
func (s *Stmt) QueryContext(ctx context.Context, args ...any) (rows *sql.Rows, err error) {
	if s.prepared != nil {
		rows, err = s.prepared.QueryContext(ctx, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, s.text, args...)
	}
	return rows, s.Failed(err)
}

// ExecIn runs the statement in tx: prepared, bound to tx (database/sql prepares it on tx's
// connection where it is not yet), or by its text where it runs by its text or tx cannot bind
// it (SQLite, whose transactions database/sql does not see: see dialect.Tx). Its errors are as
// Failed makes them.
func (s *Stmt) ExecIn(ctx context.Context, tx dialect.Tx, args ...any) (sql.Result, error) {
	if s.prepared != nil {
		if bound := tx.StmtContext(ctx, s.prepared); bound != nil {
			res, err := bound.ExecContext(ctx, args...)
			return res, s.Failed(err)
		}
	}
	res, err := tx.ExecContext(ctx, s.text, args...)
	return res, s.Failed(err)
}

// QueryIn runs the statement in tx, as ExecIn does, and returns its rows.
func (s *Stmt) QueryIn(ctx context.Context, tx dialect.Tx, args ...any) (*sql.Rows, error) {
	if s.prepared != nil {
		if bound := tx.StmtContext(ctx, s.prepared); bound != nil {
			rows, err := bound.QueryContext(ctx, args...)
			return rows, s.Failed(err)
		}
	}
	rows, err := tx.QueryContext(ctx, s.text, args...)
	return rows, s.Failed(err)
}

// QueryRowIn returns the Scan of the first row of a run of the statement in tx (QueryIn), which
// runs it when called and fails with sql.ErrNoRows where it returns none. Its errors are as
// Failed makes them.
func (s *Stmt) QueryRowIn(ctx context.Context, tx dialect.Tx, args ...any) func(dest ...any) error {
	return func(dest ...any) error {
		rows, err := s.QueryIn(ctx, tx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return s.Failed(err)
			}
			return sql.ErrNoRows
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		return s.Failed(rows.Close())
	}
}

// Failed returns err, the error of a run of the statement (on the pool, in a transaction, or on
// a connection of the form's own), naming the pooler and the settings that avoid it where the
// server lost or already held the connection's prepared statement (dialect.Pooled); any other
// error as it is.
func (s *Stmt) Failed(err error) error { return dialect.Pooled(err, s.prepared == nil) }

// Close frees the prepared statement; a statement run by its text, or none (nil), has nothing
// to free.
func (s *Stmt) Close() error {
	if s == nil || s.prepared == nil {
		return nil
	}
	return s.prepared.Close()
}

// Statement checks query against the server, for the statement named what ("claim", "ack",
// …), and returns it to run: prepared on db, or, where t.Unprepared, unprepared and checked by
// EXPLAIN with every parameter NULL, which plans the statement without running it. A statement
// the server refuses wraps inbox.ErrSchema and names the table, the statement and its text: at
// startup it means a table or column the server does not have. A connection cut under it (a
// killed session, a restarting server: dialect.ConnectionFailed) is not taken for that: a
// refused statement is refused again on a second try, and a statement whose tries failed
// with their connection, or whose server answers no ping, fails with the connection's error,
// not ErrSchema, so a consumer tries again. A refusal of the connection's own prepared
// statement (dialect.StatementLost), which a pooler in transaction mode causes, wraps
// inbox.ErrDialect and names the settings that avoid it (dialect.Pooled).
//
// SQLite drivers compile a statement only when it first runs, so on SQLite a prepared
// statement is also compiled by EXPLAIN, which fails on a missing table or column.
func (t *Table) Statement(ctx context.Context, db *sql.DB, what string, built sqltext.Statement) (*Stmt, error) {
	query := built.SQL
	s := &Stmt{db: db, text: query, args: built.Args}
	check := func() (err error) {
		if t.Unprepared {
			return explain(ctx, t.D.Caps(), db, query)
		}
		s.prepared, err = t.compile(ctx, db, query)
		return err
	}
	err := check()
	if err != nil && ctx.Err() == nil {
		err = check()
	}
	if err != nil {
		return nil, t.refused(ctx, db, what, query, err)
	}
	return s, nil
}

// Check checks query as Statement does and keeps nothing: for a statement the form runs by its
// text on a pinned connection, where a statement prepared on the pool cannot run.
func (t *Table) Check(ctx context.Context, db *sql.DB, what, query string) error {
	s, err := t.Statement(ctx, db, what, sqltext.Statement{SQL: query})
	if err != nil {
		return err
	}
	return s.Close()
}

// refused is the error of statement what, which the server refused with err (see Statement).
// Only a refusal of the statement itself is the schema's: a connection that failed under it,
// or that the server answers no more, is the connection's failure, and a prepared statement of
// the connection's own that the server lost or already held is a pooler's (dialect.Pooled).
func (t *Table) refused(ctx context.Context, db *sql.DB, what, query string, err error) error {
	doing, verb := "preparing", "prepare"
	if t.Unprepared {
		doing, verb = "checking", "pass its check (EXPLAIN)"
	}
	if dialect.StatementLost(err) {
		return sentinel.Errorf(nil, sentinel.Table(t.Raw.Name), "%s the %s statement: %w", doing, what, dialect.Pooled(err, t.Unprepared))
	}
	if ctx.Err() != nil || dialect.ConnectionFailed(err) {
		return sentinel.Errorf(nil, sentinel.Table(t.Raw.Name), "%s the %s statement: its connection failed: %w", doing, what, err)
	}
	if pingErr := db.PingContext(ctx); pingErr != nil {
		return sentinel.Errorf(nil, sentinel.Table(t.Raw.Name), "%s the %s statement: the server answers no connection: %w", doing, what, errors.Join(err, pingErr))
	}
	if err := t.checkPauses(ctx, db); err != nil {
		return err
	}
	return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Raw.Name), "the %s statement does not %s: %v; create the table and columns the description names, or fix the description (statement: %s)", what, verb, err, query)
}

// checkPauses fails, wrapping inbox.ErrSchema and naming the statement that creates it, where
// the description names a pauses table (inbox.Table.Pauses) that the database refuses to read:
// a claim that reads it is refused for that reason, which the claim's own error would not say.
func (t *Table) checkPauses(ctx context.Context, db *sql.DB) error {
	if t.Raw.Pauses == "" {
		return nil
	}
	w := t.SQL().Pauses()
	rows, err := db.QueryContext(ctx, w.Check().SQL)
	if err == nil {
		return rows.Close()
	}
	return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Raw.Name), "its pauses table %q (inbox.Table.Pauses), which every claim reads, cannot be read (%v): create it with `inbox schema -pauses -apply`, or run: %s", t.Raw.Pauses, err, w.Create())
}

// compile prepares query once (and on SQLite compiles it with EXPLAIN).
func (t *Table) compile(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	s, err := db.PrepareContext(ctx, query)
	if err == nil && t.D.Caps().LazyCompile {
		if err = explain(ctx, t.D.Caps(), db, query); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, err
}

// explain has the server plan query without running it (SQLite: compile it). EXPLAIN wants
// every parameter bound: NULL will do, the server inferring each one's type from where it
// stands, as it does when it prepares the statement, except for a LIMIT, which MySQL and
// MariaDB take only as a number.
func explain(ctx context.Context, caps *dialect.Caps, db *sql.DB, query string) error {
	args, err := explainArgs(caps, query)
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, "EXPLAIN "+query, args...)
	if err != nil {
		return err
	}
	return rows.Close()
}

// explainArgs are the arguments explain binds for query's parameters outside its quoted names
// and literals (the ?, or where they are numbered, Postgres, $1 to the highest $n): NULL, or 1
// for a LIMIT.
func explainArgs(caps *dialect.Caps, query string) ([]any, error) {
	shape, _, _, err := sqlshape.Split(query, caps.Quote)
	if err != nil {
		return nil, err
	}
	var args []any
	for i := 0; i < len(shape); i++ {
		n := len(args) + 1
		switch {
		case !caps.NumberedParams && shape[i] == '?':
		case caps.NumberedParams && shape[i] == '$':
			end := i + 1
			for end < len(shape) && '0' <= shape[end] && shape[end] <= '9' {
				end++
			}
			k, err := strconv.Atoi(shape[i+1 : end])
			if err != nil {
				continue
			}
			n = k
		default:
			continue
		}
		for len(args) < n {
			args = append(args, nil)
		}
		if before := strings.TrimRight(shape[:i], " "); len(before) >= 6 && strings.EqualFold(before[len(before)-6:], " LIMIT") {
			args[n-1] = 1
		}
	}
	return args, nil
}
