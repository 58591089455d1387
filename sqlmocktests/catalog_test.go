package sqlmocktests

import (
	"database/sql/driver"
	"strings"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
)

// The catalog queries every form's Open runs to check its table's column types, written out
// here so that the tests pin them.
const (
	schemaPostgresColumns = `SELECT a.attname, format_type(a.atttypid, a.atttypmod), b.typname, ` +
		`CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END, a.attnotnull ` +
		`FROM pg_catalog.pg_class c ` +
		`JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ` +
		`JOIN pg_catalog.pg_type t ON t.oid = a.atttypid ` +
		`JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END ` +
		`WHERE c.relname = $1 AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY a.attnum`
	schemaMySQLColumns = "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, DATETIME_PRECISION, IS_NULLABLE, EXTRA, COLLATION_NAME " +
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION"
	schemaSQLiteColumns = `SELECT name, type, "notnull" FROM pragma_table_info(?)`
	schemaSQLiteStrict  = `SELECT COALESCE(MAX("strict"), 0) FROM pragma_table_list WHERE name = ?`
)

// expectColumns expects the catalog query of Open on database db ("postgres", "mysql",
// "mariadb" or "sqlite") and answers it with a column of the README's type for each column tbl
// names, and for lease, the lease column, when it is not empty.
func expectColumns(m *recorder, db string, tbl inbox.Table, lease string) {
	mock := m.mock
	type col struct {
		name         string
		pg, pgBase   string
		my, myBase   string
		myPrecision  driver.Value
		sqlite       string
		generated    bool
		notNullOnAll bool
	}
	var cols []col
	add := func(name string, c col) {
		if name != "" {
			c.name = name
			cols = append(cols, c)
		}
	}
	timestamp := col{pg: "timestamp with time zone", pgBase: "timestamptz", my: "datetime(6)", myBase: "datetime", myPrecision: int64(6), sqlite: "TEXT"}
	integer := col{pg: "integer", pgBase: "int4", my: "int(11)", myBase: "int", sqlite: "INTEGER", notNullOnAll: true}
	add(tbl.ID, col{pg: "bigint", pgBase: "int8", my: "bigint(20)", myBase: "bigint", sqlite: "INTEGER", generated: tbl.IDGenerated, notNullOnAll: true})
	add(tbl.Payload, col{pg: "bytea", pgBase: "bytea", my: "longblob", myBase: "longblob", sqlite: "BLOB"})
	add(tbl.Attempt, integer)
	add(tbl.ProcessedAt, timestamp)
	add(tbl.Queue, col{pg: "text", pgBase: "text", my: "varchar(191)", myBase: "varchar", sqlite: "TEXT", notNullOnAll: true})
	add(tbl.Kind, col{pg: "text", pgBase: "text", my: "varchar(191)", myBase: "varchar", sqlite: "TEXT", notNullOnAll: true})
	add(tbl.Priority, integer)
	add(tbl.RetryAfter, timestamp)
	text := col{pg: "text", pgBase: "text", my: "text", myBase: "text", sqlite: "TEXT"}
	add(tbl.Headers, text)
	add(tbl.DeadAt, timestamp)
	add(tbl.LastError, text)
	add(lease, timestamp)

	switch db {
	case "postgres":
		rows := sqlmock.NewRows([]string{"attname", "format_type", "typname", "typmod", "attnotnull"})
		for _, c := range cols {
			rows.AddRow(c.name, c.pg, c.pgBase, int64(-1), c.notNullOnAll)
		}
		mock.ExpectQuery(schemaPostgresColumns).WithArgs(tbl.Name).WillReturnRows(rows)
	case "sqlite":
		rows := sqlmock.NewRows([]string{"name", "type", "notnull"})
		for _, c := range cols {
			rows.AddRow(c.name, c.sqlite, c.notNullOnAll)
		}
		mock.ExpectQuery(schemaSQLiteColumns).WithArgs(tbl.Name).WillReturnRows(rows)
		mock.ExpectQuery(schemaSQLiteStrict).WithArgs(tbl.Name).WillReturnRows(sqlmock.NewRows([]string{"strict"}).AddRow(int64(0)))
	default:
		rows := sqlmock.NewRows([]string{"COLUMN_NAME", "COLUMN_TYPE", "DATA_TYPE", "DATETIME_PRECISION", "IS_NULLABLE", "EXTRA", "COLLATION_NAME"})
		for _, c := range cols {
			nullable, extra := "YES", ""
			if c.notNullOnAll {
				nullable = "NO"
			}
			if c.generated {
				extra = "auto_increment"
			}
			var collation driver.Value
			if strings.Contains(c.my, "char") || strings.Contains(c.my, "text") {
				collation = "utf8mb4_nopad_bin" // as inbox schema declares a keyed column's
			}
			rows.AddRow(c.name, c.my, c.myBase, c.myPrecision, nullable, extra, collation)
		}
		mock.ExpectQuery(schemaMySQLColumns).WithArgs(tbl.Name).WillReturnRows(rows)
	}
}
