package schema

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Catalog queries of a table's indexes: a row per index column, by index and position.
const (
	postgresIndexes = `SELECT ic.relname, a.attname FROM pg_catalog.pg_class c ` +
		`JOIN pg_catalog.pg_index x ON x.indrelid = c.oid ` +
		`JOIN pg_catalog.pg_class ic ON ic.oid = x.indexrelid ` +
		`CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n) ` +
		`JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum ` +
		`WHERE c.relname = $1 AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY ic.relname, k.n`
	mysqlIndexes = "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS " +
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX"
	sqliteIndexes = `SELECT il.name, ii.name FROM pragma_index_list(?) AS il, pragma_index_info(il.name) AS ii ORDER BY il.name, ii.seqno`
)

// ReadIndexes reads the indexes of the table named name from the catalog of d's database: the
// columns of each, in order, by the index's name. An index on an expression lists only its
// plain columns.
func ReadIndexes(ctx context.Context, db *sql.DB, d dialect.Dialect, name string) (map[string][]string, error) {
	query := mysqlIndexes
	switch d.Caps().Catalog {
	case dialect.PostgresCatalog:
		query = postgresIndexes
	case dialect.SQLiteCatalog:
		query = sqliteIndexes
	}
	rows, err := db.QueryContext(ctx, query, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var index string
		var column sql.NullString // SQLite names no column of an expression
		if err := rows.Scan(&index, &column); err != nil {
			return nil, err
		}
		if column.Valid {
			out[index] = append(out[index], column.String)
		}
	}
	return out, rows.Err()
}

// LacksKind returns the name of an index among indexes that would serve the claim but for the
// kind column, want's last (see Index), or "" when there is none or want has no kind column.
func LacksKind(d dialect.Dialect, indexes map[string][]string, want Index, kind string) string {
	n := len(want.Columns)
	if kind == "" || n < 2 || want.Columns[n-1] != kind {
		return ""
	}
	short := want
	short.Columns = want.Columns[:n-1]
	return Serving(d, indexes, short)
}

// Replacing is the statement that replaces index old of the table named table by the claim
// index ix, in one ALTER TABLE (MySQL and MariaDB, whose claim index can lack the kind).
func (ix Index) Replacing(d dialect.Dialect, table, old string) (string, error) {
	qt, err := d.Quote(table)
	if err != nil {
		return "", sentinel.Errorf(inbox.ErrSchema, "", "table name: %v", err)
	}
	qo, err := d.Quote(old)
	if err != nil {
		return "", sentinel.Errorf(inbox.ErrSchema, sentinel.Table(table), "index name %q: %v", old, err)
	}
	return "ALTER TABLE " + qt + " DROP INDEX " + qo + ", ADD INDEX " + ix.quoted + " (" + strings.Join(ix.quotedColumns, ", ") + ")", nil
}

// Serving returns the name of an index among indexes whose columns begin with want's, in
// order (as written on Postgres, in any case elsewhere), or "" when there is none.
func Serving(d dialect.Dialect, indexes map[string][]string, want Index) string {
	names := make([]string, 0, len(indexes))
	for name := range indexes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		cols := indexes[name]
		if len(cols) < len(want.Columns) {
			continue
		}
		match := true
		for i, c := range want.Columns {
			if cols[i] != c && (d.Caps().CaseSensitiveNames || !strings.EqualFold(cols[i], c)) {
				match = false
				break
			}
		}
		if match {
			return name
		}
	}
	return ""
}
