// Package stmt builds the SQL the forms share: the delivery's select list and its scan, the
// predicate of a claimable row, the claim order, and preparing a statement at startup with an
// error that names the table and the statement.
package stmt

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqlshape"
)

// Table is a table description with its names quoted for one dialect.
type Table struct {
	D   dialect.Dialect
	Raw inbox.Table // as described, for messages
	Q   inbox.Table // every name quoted
}

// New quotes t for d; errors wrap inbox.ErrSchema.
func New(d dialect.Dialect, t inbox.Table) (*Table, error) {
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	return &Table{D: d, Raw: t, Q: q}, nil
}

// Params numbers a statement's parameters ($1, $2, … on Postgres; ? elsewhere).
type Params struct {
	d dialect.Dialect
	n int
}

// Params starts numbering a statement's parameters from 1.
func (t *Table) Params() *Params { return &Params{d: t.D} }

// Next returns the next parameter's placeholder.
func (p *Params) Next() string {
	p.n++
	return p.d.Placeholder(p.n)
}

// Columns is the select list Scan reads, each column prefixed with alias and a dot when alias
// is not empty: id, then payload, attempt, group and headers where the table has them.
func (t *Table) Columns(alias string) string {
	prefix := ""
	if alias != "" {
		prefix = alias + "."
	}
	cols := []string{prefix + t.Q.ID}
	for _, c := range []string{t.Q.Payload, t.Q.Attempt, t.Q.Group, t.Q.Headers} {
		if c != "" {
			cols = append(cols, prefix+c)
		}
	}
	return strings.Join(cols, ", ")
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

// ScanRow reads one row of the Columns list; it returns sql.ErrNoRows when there is none.
func (t *Table) ScanRow(row *sql.Row) (*inbox.Delivery, error) {
	return t.ScanOne(row.Scan)
}

// scanned is a delivery and the scratch its row is scanned through, allocated together: a
// row costs one allocation (and the driver's), not one per column read.
type scanned struct {
	d              inbox.Delivery
	attempt        sql.NullInt64
	group, headers sql.NullString
	dest           [5]any
}

// ScanOne reads one row of the Columns list through scan (a Rows.Scan or Row.Scan).
func (t *Table) ScanOne(scan func(...any) error) (*inbox.Delivery, error) {
	s := &scanned{}
	d, attempt, group, headers := &s.d, &s.attempt, &s.group, &s.headers
	dest := append(s.dest[:0], &d.ID)
	if t.Q.Payload != "" {
		dest = append(dest, &d.Payload)
	}
	if t.Q.Attempt != "" {
		dest = append(dest, attempt)
	}
	if t.Q.Group != "" {
		dest = append(dest, group)
	}
	if t.Q.Headers != "" {
		dest = append(dest, headers)
	}
	if err := scan(dest...); err != nil {
		return nil, err
	}
	d.Attempt = int(attempt.Int64)
	d.Group = group.String
	if headers.Valid && headers.String != "" {
		if err := json.Unmarshal([]byte(headers.String), &d.Headers); err != nil {
			// One bad row must not fail every claim of its queue: it is delivered, and the
			// consumer settles it by its undecodable-payload policy.
			d.Headers = nil
			d.Undecodable(fmt.Errorf("table %q, row %d: headers column %q does not hold a JSON object of strings: %w", t.Raw.Name, d.ID, t.Raw.Headers, err))
		}
	}
	return d, nil
}

// NextAttempt is the SET clause that counts one more delivery in the attempt column attempt
// (quoted). A NULL attempt counts as 0, a row never delivered: its first delivery reads 1 in
// every form, and the statement changes the row, which MySQL and MariaDB count only when a
// value changes (NULL + 1 is NULL, and a take that changed nothing would find no row).
func NextAttempt(attempt string) string {
	return attempt + " = COALESCE(" + attempt + ", 0) + 1"
}

// Due is the predicate of a claimable row, with alias as Columns takes it: not processed, due
// (retry_after passed) and of the queue, each where the table has the column. DueArgs appends
// its arguments in the order Due placed them.
func (t *Table) Due(p *Params, alias string) string {
	prefix := ""
	if alias != "" {
		prefix = alias + "."
	}
	var conds []string
	if t.Q.ProcessedAt != "" {
		conds = append(conds, prefix+t.Q.ProcessedAt+" IS NULL")
	}
	if t.Q.RetryAfter != "" {
		conds = append(conds, "("+prefix+t.Q.RetryAfter+" IS NULL OR "+prefix+t.Q.RetryAfter+" <= "+p.Next()+")")
	}
	if t.Q.Group != "" {
		conds = append(conds, prefix+t.Q.Group+" = "+p.Next())
	}
	if len(conds) == 0 {
		return "1 = 1"
	}
	return strings.Join(conds, " AND ")
}

// DueArgs appends to args the arguments of Due: now (the claim's one reading of the clock, as
// the dialect binds it) and the queue name.
func (t *Table) DueArgs(args []any, now any, queue string) []any {
	if t.Q.RetryAfter != "" {
		args = append(args, now)
	}
	if t.Q.Group != "" {
		args = append(args, queue)
	}
	return args
}

// Order is the claim order: priority, retry_after, id, each where the table has it. A row never
// delayed (retry_after NULL) comes before a delayed one that is due, on every database: MySQL,
// MariaDB and SQLite sort NULL first by themselves; Postgres is told to.
func (t *Table) Order(alias string) string {
	prefix := ""
	if alias != "" {
		prefix = alias + "."
	}
	var cols []string
	if t.Q.Priority != "" {
		cols = append(cols, prefix+t.Q.Priority)
	}
	if t.Q.RetryAfter != "" {
		col := prefix + t.Q.RetryAfter
		if t.D.Name() == "postgres" {
			col += " NULLS FIRST"
		}
		cols = append(cols, col)
	}
	return strings.Join(append(cols, prefix+t.Q.ID), ", ")
}

// Prepare prepares query on db for the statement named what ("claim", "ack", …). A statement
// the server refuses wraps inbox.ErrSchema and names the table, the statement and its text: at
// startup it means a table or column the server does not have. A connection cut under the
// first try (a killed backend, a restarting server) is not taken for that: a refused statement
// is refused again on a second try, and when the server cannot be reached the error is the
// connection's, not ErrSchema, so a consumer tries again.
//
// SQLite drivers compile a statement only when it first runs, so on SQLite Prepare also has it
// compiled by EXPLAIN, which fails on a missing table or column without running anything.
func (t *Table) Prepare(ctx context.Context, db *sql.DB, what, query string) (*sql.Stmt, error) {
	s, err := t.compile(ctx, db, query)
	if err != nil && ctx.Err() == nil {
		s, err = t.compile(ctx, db, query)
	}
	if err != nil {
		if pingErr := db.PingContext(ctx); pingErr != nil {
			return nil, fmt.Errorf("inbox: table %q: preparing the %s statement: %w", t.Raw.Name, what, errors.Join(err, pingErr))
		}
		return nil, fmt.Errorf("%w: table %q: the %s statement does not prepare: %v; create the table and columns the description names, or fix the description (statement: %s)", inbox.ErrSchema, t.Raw.Name, what, err, query)
	}
	return s, nil
}

// compile prepares query once (and on SQLite compiles it with EXPLAIN).
func (t *Table) compile(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	s, err := db.PrepareContext(ctx, query)
	if err == nil && t.D.Name() == "sqlite" {
		if err = explain(ctx, db, query); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, err
}

// explain compiles a SQLite statement without running it. EXPLAIN wants every parameter bound,
// and NULL will do; the parameters are the "?" outside the quoted names (the library's
// statements hold no string literals).
func explain(ctx context.Context, db *sql.DB, query string) error {
	shape, _, _, err := sqlshape.Split(query, '`')
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, "EXPLAIN "+query, make([]any, strings.Count(shape, "?"))...)
	if err != nil {
		return err
	}
	return rows.Close()
}
