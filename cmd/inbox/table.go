package main

import (
	"context"
	"database/sql"
	"flag"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
)

// tableFlags are the flags that describe a table by its columns' roles, for the commands that
// operate one. Their defaults are the README's table; an empty value (-headers=) says the
// table has no column for that role. The kind column alone defaults to none, since the
// README's table has none: -kind-column=kind names it.
type tableFlags struct {
	name      *string
	generated *bool
	roles     []struct {
		column *string
		set    func(t *inbox.Table, column string)
	}
}

func addTableFlags(fs *flag.FlagSet) *tableFlags {
	f := &tableFlags{
		name:      fs.String("table", "jobs", "the table's name"),
		generated: fs.Bool("id-generated", true, "the database assigns the id (false: publishers give it)"),
	}
	for _, r := range []struct {
		flag, column, role string
		set                func(t *inbox.Table, column string)
	}{
		{"id", "id", "ID", func(t *inbox.Table, c string) { t.ID = c }},
		{"payload", "payload", "Payload", func(t *inbox.Table, c string) { t.Payload = c }},
		{"attempt", "attempt", "Attempt", func(t *inbox.Table, c string) { t.Attempt = c }},
		{"processed-at", "processed_at", "ProcessedAt", func(t *inbox.Table, c string) { t.ProcessedAt = c }},
		{"queue-column", "queue", "Queue", func(t *inbox.Table, c string) { t.Queue = c }},
		{"kind-column", "", "Kind", func(t *inbox.Table, c string) { t.Kind = c }},
		{"priority", "priority", "Priority", func(t *inbox.Table, c string) { t.Priority = c }},
		{"retry-after", "retry_after", "RetryAfter", func(t *inbox.Table, c string) { t.RetryAfter = c }},
		{"headers", "headers", "Headers", func(t *inbox.Table, c string) { t.Headers = c }},
		{"dead-at", "dead_at", "DeadAt", func(t *inbox.Table, c string) { t.DeadAt = c }},
		{"last-error", "last_error", "LastError", func(t *inbox.Table, c string) { t.LastError = c }},
		{"lease", "locked_until", "LockedUntil", func(t *inbox.Table, c string) { t.LockedUntil = c }},
	} {
		usage := "the " + r.role + " role's column"
		switch {
		case r.column == "":
			usage += " (the kinds of job: stats counts each queue's rows per kind); none unless named"
		case r.role != "ID":
			usage += "; empty (-" + r.flag + "=) when the table has none"
		}
		f.roles = append(f.roles, struct {
			column *string
			set    func(t *inbox.Table, column string)
		}{fs.String(r.flag, r.column, usage), r.set})
	}
	return f
}

// table is the description the flags give.
func (f *tableFlags) table() inbox.Table {
	t := inbox.Table{Name: *f.name, IDGenerated: *f.generated}
	for _, r := range f.roles {
		r.set(&t, *r.column)
	}
	return t
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

// operate opens the database a command names for access a, and the operator of its table.
func (s *session) operate(ctx context.Context, dsn string, f *tableFlags, a access) (*operated, error) {
	t, ok, err := s.target(dsn)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, usagef("no database: give -dsn, or set $INBOX_DSN")
	}
	return s.operateOn(ctx, t, f, a)
}

func (s *session) operateOn(ctx context.Context, t target, f *tableFlags, a access) (*operated, error) {
	// The description is checked before connecting: a mistyped flag is a usage error.
	if _, err := admin.Schema(t.dialect, f.table()); err != nil {
		return nil, usagef("%v", err)
	}
	db, err := open(ctx, t, 2, a)
	if err != nil {
		return nil, err
	}
	adm, err := admin.New(db, t.dialect, f.table())
	if err != nil {
		db.Close()
		return nil, err
	}
	return &operated{db: db, admin: adm, d: t.dialect, table: f.table(), shown: t.shown}, nil
}

// dialectNamed is the dialect of a database named as -db names it.
func dialectNamed(name string) (dialect.Dialect, error) {
	d, err := dialect.Parse(name, "")
	if err != nil {
		return nil, usagef("-db %q: name postgres, mysql, mariadb or sqlite", name)
	}
	return d, nil
}
