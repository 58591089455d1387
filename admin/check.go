package admin

import (
	"context"

	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Check is an existing table compared with its description.
type Check struct {
	Table   string        `json:"table"`
	Found   bool          `json:"found"` // the catalog lists the table; when not, every column is missing
	Columns []ColumnCheck `json:"columns"`
	Index   IndexCheck    `json:"index"`
}

// OK reports whether the table has every column its description names, each of a type that
// fits its role, and its claim index.
func (c Check) OK() bool {
	for _, col := range c.Columns {
		if !col.OK() {
			return false
		}
	}
	return c.Found && c.Index.OK()
}

// ColumnCheck is the check of one column the description names.
type ColumnCheck struct {
	Role   string `json:"role"`   // the role, as inbox.Table names it ("lease column" for the lease form's)
	Column string `json:"column"` // the column's name
	// Has is the column's type as the catalog shows it (on SQLite the declared type and its
	// affinity); empty when the table lacks the column.
	Has string `json:"has,omitempty"`
	// Problem says why the column does not fit its role ("is missing", say); empty when it fits.
	Problem string `json:"problem,omitempty"`
	Needs   string `json:"needs"` // what the role needs, on this database
	// Fix is the statement that makes the column fit (on SQLite, where a column's type cannot
	// change, how to rebuild the table); empty when it fits.
	Fix  string `json:"fix,omitempty"`
	text string
}

// OK reports whether the column fits its role.
func (c ColumnCheck) OK() bool { return c.Problem == "" }

// String says what the check found, in a sentence that names the column, its role, its type,
// what the role needs and the statement that fixes it.
func (c ColumnCheck) String() string { return c.text }

// IndexCheck is the check of the claim index.
type IndexCheck struct {
	// Columns are the claim index's columns, in order; empty when the table needs none (its
	// claim orders by id alone, which the primary key serves).
	Columns []string `json:"columns,omitempty"`
	// Found names an index of the table whose columns begin with Columns; empty when there is
	// none.
	Found string `json:"found,omitempty"`
	// LacksKind names an index that would serve the claim but for the kind column, which on
	// MySQL and MariaDB the claim index ends with (a consumer of kinds claims by it); empty
	// when there is none. Fix then replaces it.
	LacksKind string `json:"lacksKind,omitempty"`
	// Fix is the CREATE INDEX statement that adds the claim index (or, where an index lacks
	// the kind, the ALTER TABLE that replaces it); empty when none is needed or one is found.
	Fix string `json:"fix,omitempty"`
}

// OK reports whether the table needs no claim index, or has one.
func (c IndexCheck) OK() bool { return len(c.Columns) == 0 || c.Found != "" }

// Check reads the table from the database's catalog and compares it with the description: each
// column the description names (and the lease column, where New was given one), missing or of
// a type that does not fit its role (a lease column without microseconds among them), with the
// statement that fixes it; and whether an index serves the claim (see Schema). Columns the
// description does not name are not checked.
func (a *Admin) Check(ctx context.Context) (Check, error) {
	tbl, err := schema.Read(ctx, a.db, a.d, a.t.Name)
	if err != nil {
		return Check{}, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "reading its columns from the catalog: %w", err)
	}
	out := Check{Table: a.t.Name, Found: tbl.Found}
	for _, r := range schema.Check(a.d, tbl, schema.Describe(a.t, a.t.LockedUntil)) {
		out.Columns = append(out.Columns, ColumnCheck{
			Role: r.Role.String(), Column: r.Column, Has: r.Has, Problem: r.Problem, Needs: r.Needs, Fix: r.Fix, text: r.String(),
		})
	}
	want, err := schema.ClaimIndex(a.d, a.t)
	if err != nil {
		return Check{}, err
	}
	out.Index.Columns = want.Columns
	if want.Name == "" {
		return out, nil
	}
	if tbl.Found {
		indexes, err := schema.ReadIndexes(ctx, a.db, a.d, a.t.Name)
		if err != nil {
			return Check{}, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "reading its indexes from the catalog: %w", err)
		}
		out.Index.Found = schema.Serving(a.d, indexes, want)
		if out.Index.Found == "" {
			out.Index.LacksKind = schema.LacksKind(a.d, indexes, want, a.t.Kind)
		}
	}
	switch {
	case out.Index.Found != "":
	case out.Index.LacksKind != "":
		if out.Index.Fix, err = want.Replacing(a.d, a.t.Name, out.Index.LacksKind); err != nil {
			return Check{}, err
		}
	default:
		out.Index.Fix = want.Create
	}
	return out, nil
}
