package schema

import (
	"slices"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Definitions of the columns the README gives each role, by database; the id's is that of an
// id the publisher gives (see definition for a generated one). MySQL's and MariaDB's keyed
// roles are mysqlKeyDefinition's.
var (
	postgresDefinitions = map[Role]string{
		ID: "BIGINT PRIMARY KEY", Payload: "BYTEA", Attempt: "INT NOT NULL DEFAULT 0", Priority: "INT NOT NULL DEFAULT 0",
		Queue: "TEXT NOT NULL DEFAULT ''", Kind: "TEXT NOT NULL DEFAULT ''", Headers: "TEXT", LastError: "TEXT",
		ProcessedAt: "TIMESTAMPTZ", RetryAfter: "TIMESTAMPTZ", DeadAt: "TIMESTAMPTZ", CreatedAt: "TIMESTAMPTZ", CancelledAt: "TIMESTAMPTZ", Lease: "TIMESTAMPTZ",
		UniqueKey: "VARCHAR(191)", GroupKey: "VARCHAR(191)", LimitKey: "VARCHAR(191)",
	}
	mysqlDefinitions = map[Role]string{
		ID: "BIGINT PRIMARY KEY", Payload: "LONGBLOB", Attempt: "INT NOT NULL DEFAULT 0", Priority: "INT NOT NULL DEFAULT 0",
		Headers: "TEXT", LastError: "TEXT",
		ProcessedAt: "DATETIME(6) NULL", RetryAfter: "DATETIME(6) NULL", DeadAt: "DATETIME(6) NULL", CreatedAt: "DATETIME(6) NULL",
		CancelledAt: "DATETIME(6) NULL", Lease: "DATETIME(6) NULL",
	}
)

// mysqlKeyDefinition is the definition, on MySQL and MariaDB, of role r's column when r is a
// keyed role (a queue, a kind, a unique, group or limit key; see keyed), and false for another
// role.
func mysqlKeyDefinition(c *dialect.Caps, r Role) (string, bool) {
	switch r {
	case Queue, Kind:
		return sqltext.KeyText(c, 191) + " NOT NULL DEFAULT ''", true
	case UniqueKey, GroupKey, LimitKey:
		return sqltext.KeyText(c, 191) + " NULL", true
	}
	return "", false
}

// definition is the column definition the README gives role r on d's database: its type, and
// for the integers and the queue column NOT NULL with a default. generated says the database assigns
// the id (on SQLite an INTEGER PRIMARY KEY is the rowid, assigned when not given, either way).
func definition(d dialect.Dialect, r Role, generated bool) string {
	switch d.Caps().Catalog {
	case dialect.PostgresCatalog:
		if r == ID && generated {
			return "BIGSERIAL PRIMARY KEY"
		}
		return postgresDefinitions[r]
	case dialect.SQLiteCatalog:
		return sqliteDefinition(r)
	}
	if r == ID && generated {
		return "BIGINT AUTO_INCREMENT PRIMARY KEY"
	}
	if def, ok := mysqlKeyDefinition(d.Caps(), r); ok {
		return def
	}
	return mysqlDefinitions[r]
}

// Create returns the statements that create the table t describes on d's database, with the
// lease form's column when lease is not empty: the CREATE TABLE, every column typed as the
// README says, and, where the claim orders by more than the id, the claim index (see
// ClaimIndex), which on MySQL and MariaDB is part of the CREATE TABLE, and where the table has a
// unique key the UNIQUE index on it (UniqueIndex), part of the CREATE TABLE there too. It fails, wrapping
// inbox.ErrSchema, on a description Validate refuses or a name the database would not keep.
func Create(d dialect.Dialect, t inbox.Table, lease string) ([]string, error) {
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	var cols []string
	for _, n := range Describe(t, lease) {
		col, err := d.Quote(n.Column)
		if err != nil {
			return nil, sentinel.Errorf(inbox.ErrSchema, "", "table %q, %s column: %v", t.Name, n.Role, err)
		}
		cols = append(cols, col+" "+definition(d, n.Role, t.IDGenerated))
	}
	index, err := ClaimIndex(d, t)
	if err != nil {
		return nil, err
	}
	if index.Name != "" && !d.Caps().PartialIndexes {
		cols = append(cols, "INDEX "+index.quoted+" ("+strings.Join(index.quotedColumns, ", ")+")")
		index = Index{}
	}
	unique, err := UniqueIndex(d, t)
	if err != nil {
		return nil, err
	}
	if unique != "" && !d.Caps().PartialIndexes {
		cols = append(cols, unique)
		unique = ""
	}
	out := []string{"CREATE TABLE " + q.Name + " (\n    " + strings.Join(cols, ",\n    ") + "\n)"}
	if index.Name != "" {
		out = append(out, index.Create)
	}
	if unique != "" {
		out = append(out, unique)
	}
	if t.GroupKey != "" {
		group, err := GroupIndex(d, t)
		if err != nil {
			return nil, err
		}
		out = append(out, group, sqltext.CreateGroups(d.Caps()))
	}
	return out, nil
}

// GroupIndex returns the index a claim of a table with FIFO groups finds the head of a group by
// (the lowest pending id of its queue and group, docs/groups.md), named the table's name and
// "_group": where the database has partial indexes, on the queue, group and id columns of the
// pending rows (processed_at, dead_at and cancelled_at NULL, each where the table has it);
// elsewhere on the queue, group, processed_at, dead_at and cancelled_at columns and the id. Without
// it a claim reads every row of the group below its candidate, and Postgres, whose planner then
// prefers the primary key's order, every settled row below it.
func GroupIndex(d dialect.Dialect, t inbox.Table) (string, error) {
	partial := d.Caps().PartialIndexes
	settled := []string{t.ProcessedAt, t.DeadAt, t.CancelledAt}
	order := []string{t.Queue, t.GroupKey}
	if !partial {
		order = append(order, settled...)
	}
	var cols, where []string
	for _, c := range append(order, t.ID) {
		if c == "" {
			continue
		}
		q, err := d.Quote(c)
		if err != nil {
			return "", sentinel.Errorf(inbox.ErrSchema, sentinel.Column(t.Name, c), "%v", err)
		}
		cols = append(cols, q)
	}
	for _, c := range settled {
		if c != "" && partial {
			q, _ := d.Quote(c) // quoted above, by Describe's columns
			where = append(where, q+" IS NULL")
		}
	}
	name, err := d.Quote(t.Name + "_group")
	if err != nil {
		return "", sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "its group index's name: %v (name the table shorter)", err)
	}
	table, err := d.Quote(t.Name)
	if err != nil {
		return "", sentinel.Errorf(inbox.ErrSchema, "", "table name: %v", err)
	}
	index := "CREATE INDEX " + name + " ON " + table + " (" + strings.Join(cols, ", ") + ")"
	if len(where) > 0 {
		index += " WHERE " + strings.Join(where, " AND ")
	}
	return index, nil
}

// UniqueIndex returns the UNIQUE index on the unique key column of the table t describes, named
// t.UniqueIndex(): a CREATE UNIQUE INDEX statement on Postgres and SQLite, and on MySQL and
// MariaDB the UNIQUE KEY clause of the CREATE TABLE (add it to a table with ALTER TABLE … ADD).
// A plain index: NULL, a row without a key, is never a duplicate on any of the four databases,
// so no partial index is needed. Empty where t has no unique key.
func UniqueIndex(d dialect.Dialect, t inbox.Table) (string, error) {
	if t.UniqueKey == "" {
		return "", nil
	}
	name, err := d.Quote(t.UniqueIndex())
	if err != nil {
		return "", sentinel.Errorf(inbox.ErrSchema, sentinel.Column(t.Name, t.UniqueKey), "its unique index's name, %q: %v (name the table or the column shorter)", t.UniqueIndex(), err)
	}
	col, err := d.Quote(t.UniqueKey)
	if err != nil {
		return "", sentinel.Errorf(inbox.ErrSchema, sentinel.Column(t.Name, t.UniqueKey), "%v", err)
	}
	if !d.Caps().PartialIndexes {
		return "UNIQUE KEY " + name + " (" + col + ")", nil
	}
	table, err := d.Quote(t.Name)
	if err != nil {
		return "", sentinel.Errorf(inbox.ErrSchema, "", "table name: %v", err)
	}
	return "CREATE UNIQUE INDEX " + name + " ON " + table + " (" + col + ")", nil
}

// Index is the claim index of a table: an index whose columns are the claim's equality columns
// (group; on MySQL and MariaDB also processed_at and dead_at, which the claim asks to be NULL)
// and then the claim order (priority, retry_after, id), each where the table has it. On
// Postgres and SQLite it is partial, over the rows neither processed nor dead.
//
// On MySQL and MariaDB the kind column, where the table has one, comes last: a consumer of
// kinds claims kind IN (…), which InnoDB then tests on the index entry (index condition
// pushdown) before it reads the row, and the index still gives the claim's order, so that a
// claim reads its rows in order and stops at its LIMIT. After the queue, the kind would split
// the order into one run per kind: every claim, of kinds or not, would then read and sort every
// pending row of its kinds (docs/benchmarks.md shows both plans). Postgres tests the kind on the
// row whether or not the index holds it, and SQLite's planner, given ANALYZE's statistics,
// turned from the wider index to a scan of the table: neither gains from it there.
type Index struct {
	Name    string   // the table's name and "_claim"; empty when the claim orders by the id alone, which the primary key serves
	Columns []string // unquoted, in order
	Create  string   // the CREATE INDEX statement

	quoted        string
	quotedColumns []string
}

// ClaimIndex returns the claim index of the table t describes on d's database.
func ClaimIndex(d dialect.Dialect, t inbox.Table) (Index, error) {
	cols := []string{t.Queue, t.ProcessedAt, t.DeadAt, t.CancelledAt, t.Priority, t.RetryAfter, t.ID}
	if d.Caps().PartialIndexes {
		cols = []string{t.Queue, t.Priority, t.RetryAfter, t.ID}
	}
	if slices.IndexFunc(cols, func(c string) bool { return c != "" && c != t.ID }) < 0 {
		return Index{}, nil // the claim orders by the id alone, which the primary key serves
	}
	if !d.Caps().PartialIndexes {
		cols = append(cols, t.Kind)
	}
	var ix Index
	for _, c := range cols {
		if c == "" {
			continue
		}
		q, err := d.Quote(c)
		if err != nil {
			return Index{}, sentinel.Errorf(inbox.ErrSchema, sentinel.Column(t.Name, c), "%v", err)
		}
		ix.Columns = append(ix.Columns, c)
		col := q
		if c == t.RetryAfter && d.Caps().NullsLast {
			col += " NULLS FIRST" // the claim takes a row never delayed first
		}
		ix.quotedColumns = append(ix.quotedColumns, col)
	}
	ix.Name = t.Name + "_claim"
	var err error
	if ix.quoted, err = d.Quote(ix.Name); err != nil {
		return Index{}, sentinel.Errorf(inbox.ErrSchema, sentinel.Table(t.Name), "its claim index's name: %v (name the table shorter)", err)
	}
	table, err := d.Quote(t.Name)
	if err != nil {
		return Index{}, sentinel.Errorf(inbox.ErrSchema, "", "table name: %v", err)
	}
	ix.Create = "CREATE INDEX " + ix.quoted + " ON " + table + " (" + strings.Join(ix.quotedColumns, ", ") + ")"
	if d.Caps().PartialIndexes {
		var where []string
		for _, c := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
			if c != "" {
				q, _ := d.Quote(c) // quoted above, by Describe's columns
				where = append(where, q+" IS NULL")
			}
		}
		if len(where) > 0 {
			ix.Create += " WHERE " + strings.Join(where, " AND ")
		}
	}
	return ix, nil
}
