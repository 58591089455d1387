package schema

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// The side tables the claims of t read, checked at Open by every form that reads them, each
// where the description asks for it: nil where the table reads; ErrSchema naming the
// statements that create it where the database refuses it or one of its columns; the
// connection's error where the connection failed or the server answers no ping. where names
// the consumer (sentinel.Queue).

// CheckGroups checks the table of group holds (sqltext.GroupsTable), where t has a group column.
func CheckGroups(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table, where string) error {
	if t.GroupKey == "" {
		return nil
	}
	return checkSide(ctx, db, where, sqltext.CheckGroups().SQL, "the group holds' table "+sqltext.GroupsTable, func(err error) error {
		return sentinel.Errorf(inbox.ErrSchema, where, "the group column %q needs the group holds' table %s, which the database refuses (%v): `inbox schema -group-key` prints it with the table; run: %s (a table made before groups could be paused lacks paused_at: run %s)",
			t.GroupKey, sqltext.GroupsTable, err, sqltext.CreateGroups(d.Caps()), sqltext.AddGroupsPaused(d.Caps()))
	})
}

// CheckLimits checks the limits table t names and the slots table (sqltext.SlotsTable), where t
// names one; slots only where withSlots (the advisory form keeps none).
func CheckLimits(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table, where string, withSlots bool) error {
	if t.Limits == "" {
		return nil
	}
	w, err := sideSQL(d, t)
	if err != nil {
		return err
	}
	l := w.Limits()
	checks := []sqltext.Statement{l.Check()}
	if withSlots {
		checks = append(checks, sqltext.CheckSlots())
	}
	for _, check := range checks {
		err := checkSide(ctx, db, where, check.SQL, "the limits' tables", func(err error) error {
			if !withSlots {
				return sentinel.Errorf(inbox.ErrSchema, where, "concurrency limits (inbox.Table.Limits) need the limits table %s, which the database refuses (%v): `inbox schema -limits -apply` creates it; or run: %s", t.Limits, err, l.Create())
			}
			return sentinel.Errorf(inbox.ErrSchema, where, "concurrency limits (inbox.Table.Limits) need the limits table %s and the slots table %s, which the database refuses (%v): `inbox schema -limits -apply` creates them; or run: %s; %s", t.Limits, sqltext.SlotsTable, err, l.Create(), sqltext.CreateSlots(d.Caps()))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckRates checks the rates table t names, where it names one.
func CheckRates(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table, where string) error {
	if t.Rates == "" {
		return nil
	}
	w, err := sideSQL(d, t)
	if err != nil {
		return err
	}
	r := w.Rates()
	return checkSide(ctx, db, where, r.Check().SQL, "the rates table "+t.Rates, func(err error) error {
		return sentinel.Errorf(inbox.ErrSchema, where, "its rates table %q (inbox.Table.Rates), which every claim reads, cannot be read (%v): create it with `inbox schema -rates -apply`, or run: %s", t.Rates, err, r.Create())
	})
}

// sideSQL is the statements of t on d's database.
func sideSQL(d dialect.Dialect, t inbox.Table) (sqltext.SQL, error) {
	q, err := t.Quote(d)
	if err != nil {
		return sqltext.SQL{}, err
	}
	return sqltext.New(d.Caps(), sqltext.Table(q)), nil
}

// checkSide runs query, the check of a side table (what), and returns nil where it reads, the
// connection's error where the connection failed, and refused's error otherwise.
func checkSide(ctx context.Context, db *sql.DB, where, query, what string, refused func(error) error) error {
	rows, err := db.QueryContext(ctx, query)
	if err == nil {
		return rows.Close()
	}
	if ctx.Err() != nil || dialect.ConnectionFailed(err) {
		return sentinel.Errorf(nil, where, "checking %s: %w", what, err)
	}
	if pingErr := db.PingContext(ctx); pingErr != nil {
		return sentinel.Errorf(nil, where, "checking %s: the server answers no connection: %w", what, errors.Join(err, pingErr))
	}
	return refused(err)
}
