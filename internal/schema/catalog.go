package schema

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// Table is a table's columns as the database's catalog lists them.
type Table struct {
	Name    string
	Found   bool // the catalog lists the table
	Strict  bool // SQLite: a STRICT table, whose columns refuse values of another type
	Columns []Column
}

// Column is one column of a table, as the catalog lists it.
type Column struct {
	Name string
	// Type is the type as the catalog shows it: Postgres's format_type ("timestamp(0) with
	// time zone"), MySQL's and MariaDB's COLUMN_TYPE ("varchar(191)"), SQLite's declared type.
	Type string
	// Base is the type's name without modifiers, in lower case (Postgres: of a domain, its base
	// type's; MySQL, MariaDB: DATA_TYPE); on SQLite the declared type in upper case.
	Base string
	// Affinity is, on SQLite, the declared type's affinity (INTEGER, TEXT, BLOB, REAL or
	// NUMERIC); empty elsewhere.
	Affinity string
	// Precision is a time column's fractional-second digits; -1 for a column that is not a time
	// and on SQLite.
	Precision int
	NotNull   bool
	// AutoIncrement says MySQL or MariaDB assigns the column's values.
	AutoIncrement bool
	// Collation is, on MySQL and MariaDB, a text column's collation (utf8mb4_general_ci);
	// empty for a binary string and elsewhere.
	Collation string
}

// shown is the type as a message names it.
func (c Column) shown() string {
	if c.Affinity != "" {
		if c.Type == "" {
			return "declared with no type (" + c.Affinity + " affinity)"
		}
		return c.Type + " (" + c.Affinity + " affinity)"
	}
	return c.Type
}

// column finds the column named name: as written on Postgres (exact), in any case elsewhere.
func (t Table) column(name string, exact bool) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name || !exact && strings.EqualFold(c.Name, name) {
			return c, true
		}
	}
	return Column{}, false
}

// Read reads the columns of the table named name (as the description gives it, unquoted) from
// the catalog of d's database: the table the library's statements name, found as they find it.
func Read(ctx context.Context, db *sql.DB, d dialect.Dialect, name string) (Table, error) {
	var cols []Column
	var strict bool
	var err error
	switch d.Caps().Catalog {
	case dialect.PostgresCatalog:
		cols, err = readPostgres(ctx, db, name)
	case dialect.SQLiteCatalog:
		cols, strict, err = readSQLite(ctx, db, name)
	default:
		cols, err = readMySQL(ctx, db, name)
	}
	if err != nil {
		return Table{}, err
	}
	return Table{Name: name, Found: len(cols) > 0, Strict: strict, Columns: cols}, nil
}

// postgresColumns lists the columns of the table an unquoted statement would find by that name
// (pg_table_is_visible: the first on the search path), with each type's base name (a domain's
// base type) and modifier.
const postgresColumns = `SELECT a.attname, format_type(a.atttypid, a.atttypmod), b.typname, ` +
	`CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END, a.attnotnull ` +
	`FROM pg_catalog.pg_class c ` +
	`JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ` +
	`JOIN pg_catalog.pg_type t ON t.oid = a.atttypid ` +
	`JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END ` +
	`WHERE c.relname = $1 AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY a.attnum`

func readPostgres(ctx context.Context, db *sql.DB, name string) ([]Column, error) {
	return stmt.ReadRows(ctx, db, func(scan func(...any) error) (Column, error) {
		var c Column
		var typmod int
		if err := scan(&c.Name, &c.Type, &c.Base, &typmod, &c.NotNull); err != nil {
			return c, err
		}
		c.Precision = -1
		if c.Base == "timestamptz" || c.Base == "timestamp" {
			// A timestamp's modifier is its precision; -1 is the default, microseconds.
			c.Precision = 6
			if typmod >= 0 {
				c.Precision = typmod
			}
		}
		return c, nil
	}, postgresColumns, name)
}

// mysqlColumns lists the columns of a table of the connection's database.
const mysqlColumns = "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, DATETIME_PRECISION, IS_NULLABLE, EXTRA, COLLATION_NAME " +
	"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION"

func readMySQL(ctx context.Context, db *sql.DB, name string) ([]Column, error) {
	return stmt.ReadRows(ctx, db, func(scan func(...any) error) (Column, error) {
		var c Column
		var precision sql.NullInt64
		var nullable, extra string
		var collation sql.NullString
		if err := scan(&c.Name, &c.Type, &c.Base, &precision, &nullable, &extra, &collation); err != nil {
			return c, err
		}
		c.Collation = collation.String
		c.Base = strings.ToLower(c.Base)
		c.Precision = -1
		if precision.Valid && (c.Base == "datetime" || c.Base == "timestamp") {
			c.Precision = int(precision.Int64)
		}
		c.NotNull = nullable == "NO"
		c.AutoIncrement = strings.Contains(strings.ToLower(extra), "auto_increment")
		return c, nil
	}, mysqlColumns, name)
}

// sqliteColumns lists a table's columns with their declared types; sqliteStrict says whether
// the table is STRICT (SQLite 3.37 and later; earlier versions have no STRICT tables, nor this
// pragma).
const (
	sqliteColumns = `SELECT name, type, "notnull" FROM pragma_table_info(?)`
	sqliteStrict  = `SELECT COALESCE(MAX("strict"), 0) FROM pragma_table_list WHERE name = ?`
	sqliteVersion = `SELECT sqlite_version()`
)

func readSQLite(ctx context.Context, db *sql.DB, name string) ([]Column, bool, error) {
	out, err := stmt.ReadRows(ctx, db, func(scan func(...any) error) (Column, error) {
		var c Column
		if err := scan(&c.Name, &c.Type, &c.NotNull); err != nil {
			return c, err
		}
		c.Base = strings.ToUpper(strings.TrimSpace(c.Type))
		c.Affinity = affinity(c.Type)
		c.Precision = -1
		return c, nil
	}, sqliteColumns, name)
	if err != nil || len(out) == 0 {
		return out, false, err
	}
	var strict bool
	if err := db.QueryRowContext(ctx, sqliteStrict, name).Scan(&strict); err != nil {
		var version string
		if verr := db.QueryRowContext(ctx, sqliteVersion).Scan(&version); verr != nil || atLeast337(version) {
			return nil, false, err
		}
		return out, false, nil // no pragma_table_list before 3.37, and no STRICT tables either
	}
	return out, strict, nil
}

// atLeast337 reports whether a SQLite version ("3.45.1") is 3.37 or later.
func atLeast337(version string) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	return major > 3 || major == 3 && minor >= 37
}

// affinity is the column affinity SQLite gives a declared type, by the rules of "Datatypes In
// SQLite", section 3.1, in their order.
func affinity(declared string) string {
	u := strings.ToUpper(declared)
	switch {
	case strings.Contains(u, "INT"):
		return "INTEGER"
	case strings.Contains(u, "CHAR"), strings.Contains(u, "CLOB"), strings.Contains(u, "TEXT"):
		return "TEXT"
	case strings.Contains(u, "BLOB"), u == "":
		return "BLOB"
	case strings.Contains(u, "REAL"), strings.Contains(u, "FLOA"), strings.Contains(u, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}
