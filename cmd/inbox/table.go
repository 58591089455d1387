package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
)

// tableFlags are the flags that describe a table by its columns' roles, for the commands that
// operate one. Their defaults are the README's table; an empty value (-headers=) says the
// table has no column for that role. The kind and created-at columns default to none, since the
// README's table has neither: -kind-column=kind names it.
//
// A command that operates an existing table (every one but schema) infers the roles whose flags
// were not given from the table's columns (inferred): a README column the table lacks has no
// role, and a kind or created_at column the table has takes its role. A column a flag names
// must exist.
type tableFlags struct {
	fs        *flag.FlagSet
	name      *string
	generated *bool
	roles     []tableRole
}

// tableRole is one role's flag: the column it names, and the README's name of the column,
// which inference looks for where the flag was not given.
type tableRole struct {
	flag, readme string
	column       *string
	set          func(t *inbox.Table, column string)
}

func addTableFlags(fs *flag.FlagSet) *tableFlags {
	f := &tableFlags{
		fs:        fs,
		name:      fs.String("table", "jobs", "the table's name"),
		generated: fs.Bool("id-generated", true, "the database assigns the id (false: publishers give it)"),
	}
	for _, r := range []struct {
		flag, column, readme, role string
		set                        func(t *inbox.Table, column string)
	}{
		{"id", "id", "id", "ID", func(t *inbox.Table, c string) { t.ID = c }},
		{"payload", "payload", "payload", "Payload", func(t *inbox.Table, c string) { t.Payload = c }},
		{"attempt", "attempt", "attempt", "Attempt", func(t *inbox.Table, c string) { t.Attempt = c }},
		{"processed-at", "processed_at", "processed_at", "ProcessedAt", func(t *inbox.Table, c string) { t.ProcessedAt = c }},
		{"queue-column", "queue", "queue", "Queue", func(t *inbox.Table, c string) { t.Queue = c }},
		{"kind-column", "", "kind", "Kind", func(t *inbox.Table, c string) { t.Kind = c }},
		{"priority", "priority", "priority", "Priority", func(t *inbox.Table, c string) { t.Priority = c }},
		{"retry-after", "retry_after", "retry_after", "RetryAfter", func(t *inbox.Table, c string) { t.RetryAfter = c }},
		{"headers", "headers", "headers", "Headers", func(t *inbox.Table, c string) { t.Headers = c }},
		{"dead-at", "dead_at", "dead_at", "DeadAt", func(t *inbox.Table, c string) { t.DeadAt = c }},
		{"last-error", "last_error", "last_error", "LastError", func(t *inbox.Table, c string) { t.LastError = c }},
		{"created-at", "", "created_at", "CreatedAt", func(t *inbox.Table, c string) { t.CreatedAt = c }},
		{"cancelled-at", "", "cancelled_at", "CancelledAt", func(t *inbox.Table, c string) { t.CancelledAt = c }},
		{"lease", "locked_until", "locked_until", "LockedUntil", func(t *inbox.Table, c string) { t.LockedUntil = c }},
		{"unique-key", "", "unique_key", "UniqueKey", func(t *inbox.Table, c string) { t.UniqueKey = c }},
		{"group-key", "", "group_key", "GroupKey", func(t *inbox.Table, c string) { t.GroupKey = c }},
		{"limit-key", "", "limit_key", "LimitKey", func(t *inbox.Table, c string) { t.LimitKey = c }},
	} {
		usage := "the " + r.role + " role's column"
		switch {
		case r.role == "ID":
		case r.column == "":
			usage += "; none unless named, or inferred where the table has a " + r.readme + " column"
		default:
			usage += "; empty (-" + r.flag + "=) when the table has none"
		}
		column := new(string)
		*column = r.column
		if r.flag == "unique-key" || r.flag == "group-key" || r.flag == "limit-key" {
			// -unique-key (-group-key) alone names the README's column (inbox schema -unique-key).
			fs.Var(readmeColumn{column, r.readme}, r.flag, usage+"; -"+r.flag+" alone names "+r.readme)
		} else {
			fs.StringVar(column, r.flag, r.column, usage)
		}
		f.roles = append(f.roles, tableRole{r.flag, r.readme, column, r.set})
	}
	return f
}

// readmeColumn is a role's flag that, given alone (-unique-key), names the README's column, and
// given a value (-unique-key=dedupe), names that column.
type readmeColumn struct {
	column *string
	readme string
}

func (c readmeColumn) String() string {
	if c.column == nil {
		return ""
	}
	return *c.column
}

func (c readmeColumn) Set(v string) error {
	switch v {
	case "true":
		v = c.readme
	case "false":
		v = ""
	}
	*c.column = v
	return nil
}

func (readmeColumn) IsBoolFlag() bool { return true }

// table is the description the flags give.
func (f *tableFlags) table() inbox.Table {
	t := inbox.Table{Name: *f.name, IDGenerated: *f.generated}
	for _, r := range f.roles {
		r.set(&t, *r.column)
	}
	return t
}

// inferred is the description of the table as it is in db: the flags' description, in which
// each role whose flag was not given names the README's column where the table has it, and
// none where it lacks it. A column a given flag names (or the id's) that the table lacks fails,
// with the statement that adds it, and so does a table that does not exist.
func (f *tableFlags) inferred(ctx context.Context, db *sql.DB, d dialect.Dialect) (inbox.Table, error) {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	probe := f.table()
	columns := make([]string, len(f.roles)) // the column each role names in probe
	for i, r := range f.roles {
		columns[i] = *r.column
		if !given[r.flag] {
			columns[i] = r.readme
			r.set(&probe, r.readme)
		}
	}
	a, err := admin.New(db, d, probe)
	if err != nil {
		return inbox.Table{}, usagef("%v", err)
	}
	c, err := a.Check(ctx)
	if err != nil {
		return inbox.Table{}, err
	}
	if !c.Found {
		return inbox.Table{}, fmt.Errorf("table %q does not exist: create it with inbox schema -apply, or name it with -table", probe.Name)
	}
	missing := map[string]admin.ColumnCheck{}
	for _, col := range c.Columns {
		if col.Has == "" {
			missing[col.Column] = col
		}
	}
	t := probe
	for i, r := range f.roles {
		col, lacks := missing[columns[i]]
		switch {
		case !lacks:
		case given[r.flag] || r.flag == "id":
			return inbox.Table{}, usagef("-%s: %s", r.flag, col)
		default:
			r.set(&t, "")
		}
	}
	return withPauses(ctx, db, d, t)
}

// withPauses is t naming the table of paused queues (inbox.PausesTable) where the database has
// it, as inbox schema -pauses creates it, so that stats marks the paused queues and pause and
// resume can write it; t as it is where the database lacks it.
func withPauses(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table) (inbox.Table, error) {
	p := t
	p.Pauses = inbox.PausesTable
	a, err := admin.New(db, d, p)
	if err != nil {
		return inbox.Table{}, usagef("%v", err)
	}
	switch _, err := a.Paused(ctx); {
	case errors.Is(err, inbox.ErrSchema):
		return t, nil
	case err != nil:
		return inbox.Table{}, err
	}
	return p, nil
}

// withLimits is t naming the limits' tables (inbox.LimitsTable) and the rates table
// (inbox.RatesTable) where the database has them, as inbox schema -limits and -rates create
// them, so that the page lists the limits and rates and sets them; t without each the database
// lacks. Limits count the rows in work by the lease form's lease column: a table without one
// names no limits table.
func withLimits(ctx context.Context, db *sql.DB, d dialect.Dialect, t inbox.Table) (inbox.Table, error) {
	for _, side := range []struct {
		set  func(*inbox.Table)
		read func(context.Context, *admin.Admin) error
		skip bool
	}{
		{func(t *inbox.Table) { t.Limits = inbox.LimitsTable }, func(ctx context.Context, a *admin.Admin) error { _, err := a.Limits(ctx); return err }, t.LockedUntil == ""},
		{func(t *inbox.Table) { t.Rates = inbox.RatesTable }, func(ctx context.Context, a *admin.Admin) error { _, err := a.Rates(ctx); return err }, false},
	} {
		if side.skip {
			continue
		}
		p := t
		side.set(&p)
		a, err := admin.New(db, d, p)
		if err != nil {
			return inbox.Table{}, usagef("%v", err)
		}
		switch err := side.read(ctx, a); {
		case errors.Is(err, inbox.ErrSchema):
			continue
		case err != nil:
			return inbox.Table{}, err
		}
		t = p
	}
	return t, nil
}

// An operated table is a command's table on its database: the connection, the table's
// operator, the description the flags give, and the database as the output shows it.
type operated struct {
	db    *sql.DB
	admin *admin.Admin
	d     dialect.Dialect
	table inbox.Table
	shown string
}

// operate opens the database a command names for access a, and the operator of its table as
// the table is there (tableFlags.inferred).
func (s *session) operate(ctx context.Context, dsn string, f *tableFlags, a access) (*operated, error) {
	t, ok, err := s.target(dsn)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, usagef("no database: give -dsn, or set $INBOX_DSN")
	}
	return s.operateOn(ctx, t, f, a, f.inferred)
}

// operateOn opens t for access a, and the operator of the table describe says it holds.
func (s *session) operateOn(ctx context.Context, t target, f *tableFlags, a access, describe func(context.Context, *sql.DB, dialect.Dialect) (inbox.Table, error)) (*operated, error) {
	// The description is checked before connecting: a mistyped flag is a usage error.
	if _, err := admin.Schema(t.dialect, f.table()); err != nil {
		return nil, usagef("%v", err)
	}
	db, err := open(ctx, t, 2, a)
	if err != nil {
		return nil, err
	}
	tbl, err := describe(ctx, db, t.dialect)
	if err == nil {
		var adm *admin.Admin
		if adm, err = admin.New(db, t.dialect, tbl); err == nil {
			return &operated{db: db, admin: adm, d: t.dialect, table: tbl, shown: t.shown}, nil
		}
	}
	db.Close()
	return nil, err
}

// described is the description the flags give, as the schema command takes it.
func (f *tableFlags) described(context.Context, *sql.DB, dialect.Dialect) (inbox.Table, error) {
	return f.table(), nil
}

// dialectNamed is the dialect of a database named as -db names it.
func dialectNamed(name string) (dialect.Dialect, error) {
	d, err := dialect.Parse(name, "")
	if err != nil {
		return nil, usagef("-db %q: name postgres, mysql, mariadb or sqlite", name)
	}
	return d, nil
}
