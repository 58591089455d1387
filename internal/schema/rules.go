package schema

import (
	"fmt"
	"slices"

	"github.com/sqlinbox/inbox/dialect"
)

// rules are one database's answers: what a role needs, whether a column fits it (the problem,
// or ""), the statement that fixes a column that does not fit, and the one that adds a missing
// column. Table and column names come quoted.
type rules struct {
	needs func(r Role) string
	fits  func(r Role, c Column, strict bool) string
	fix   func(table, col string, r Role, c Column) string
	add   func(table, col string, r Role) string
}

func rulesOf(d dialect.Dialect) rules {
	switch d.Caps().Catalog {
	case dialect.PostgresCatalog:
		return rules{postgresNeeds, postgresFits, postgresFix, postgresAdd}
	case dialect.SQLiteCatalog:
		return rules{sqliteNeeds, sqliteFits, sqliteFix, sqliteAdd}
	}
	return rules{mysqlNeeds, mysqlFits, mysqlFix, mysqlAdd}
}

// lossyLease is the problem of a lease column that drops fractional seconds.
func lossyLease(precision int) string {
	return fmt.Sprintf("which keeps %d fractional digits of a second: the lease token is compared to the microsecond, so every extension and settlement would find its lease lost", precision)
}

// Postgres.

var (
	postgresIntegers = []string{"int2", "int4", "int8"}
	postgresTimes    = []string{"timestamptz", "timestamp"}
	postgresTexts    = []string{"text", "varchar", "bpchar", "citext", "name"}
	postgresJSON     = []string{"json", "jsonb"}
)

func postgresNeeds(r Role) string {
	switch r {
	case ID, Attempt, Priority:
		return "an integer type (SMALLINT, INTEGER or BIGINT)"
	case ProcessedAt, RetryAfter, DeadAt:
		return "a timestamp (TIMESTAMPTZ, or TIMESTAMP)"
	case Lease:
		return "a timestamp that keeps microseconds (TIMESTAMPTZ or TIMESTAMP, with no precision below 6)"
	case Queue:
		return "a text type (TEXT, VARCHAR or CHAR)"
	case Payload:
		return "bytes or text (BYTEA, TEXT, VARCHAR, JSON or JSONB)"
	}
	return "text (TEXT, VARCHAR, JSON or JSONB)"
}

func postgresFits(r Role, c Column, _ bool) string {
	switch r {
	case ID, Attempt, Priority:
		if !slices.Contains(postgresIntegers, c.Base) {
			return "not an integer type"
		}
	case ProcessedAt, RetryAfter, DeadAt, Lease:
		if !slices.Contains(postgresTimes, c.Base) {
			return "not a timestamp"
		}
		if r == Lease && c.Precision < 6 {
			return lossyLease(c.Precision)
		}
	case Queue:
		if !slices.Contains(postgresTexts, c.Base) {
			return "not a text type"
		}
	case Payload:
		if !slices.Contains(postgresTexts, c.Base) && !slices.Contains(postgresJSON, c.Base) && c.Base != "bytea" {
			return "neither bytes nor text"
		}
	case Headers, LastError:
		if !slices.Contains(postgresTexts, c.Base) && !slices.Contains(postgresJSON, c.Base) {
			return "not text"
		}
	}
	return ""
}

// postgresType is the type a fix gives a column of role r that has type c (a timestamp keeps
// its kind, with or without time zone).
func postgresType(r Role, c Column) string {
	switch r {
	case ID:
		return "BIGINT"
	case Attempt, Priority:
		return "INTEGER"
	case ProcessedAt, RetryAfter, DeadAt, Lease:
		if c.Base == "timestamp" {
			return "TIMESTAMP"
		}
		return "TIMESTAMPTZ"
	case Payload:
		return "BYTEA"
	}
	return "TEXT"
}

func postgresFix(table, col string, r Role, c Column) string {
	typ := postgresType(r, c)
	fix := "ALTER TABLE " + table + " ALTER COLUMN " + col + " TYPE " + typ
	switch {
	case typ == "BYTEA":
		return fix + " USING convert_to(" + col + "::text, 'UTF8')"
	case typ == "TEXT":
		return fix // every type converts to text
	case (typ == "TIMESTAMP" || typ == "TIMESTAMPTZ") && slices.Contains(postgresTimes, c.Base):
		return fix // only the precision changes
	}
	return fix + " USING " + col + "::" + typ
}

func postgresAdd(table, col string, r Role) string {
	def := postgresDefinitions[r]
	if r == ID {
		def = "BIGSERIAL PRIMARY KEY"
	}
	return "ALTER TABLE " + table + " ADD COLUMN " + col + " " + def
}

// MySQL and MariaDB.

var (
	mysqlIntegers = []string{"tinyint", "smallint", "mediumint", "int", "bigint"}
	mysqlTimes    = []string{"datetime", "timestamp"}
	mysqlTexts    = []string{"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
	mysqlBinaries = []string{"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
)

func mysqlNeeds(r Role) string {
	switch r {
	case ID, Attempt, Priority:
		return "an integer type (INT, BIGINT, …)"
	case ProcessedAt, RetryAfter, DeadAt:
		return "a time (DATETIME(6), or TIMESTAMP)"
	case Lease:
		return "a time that keeps microseconds (DATETIME(6), or TIMESTAMP(6))"
	case Queue:
		return "a string type (VARCHAR, CHAR or TEXT)"
	case Payload:
		return "bytes or text (LONGBLOB, BLOB, VARBINARY, TEXT, JSON, …)"
	}
	return "text (TEXT, VARCHAR or JSON)"
}

func mysqlFits(r Role, c Column, _ bool) string {
	switch r {
	case ID, Attempt, Priority:
		if !slices.Contains(mysqlIntegers, c.Base) {
			return "not an integer type"
		}
	case ProcessedAt, RetryAfter, DeadAt, Lease:
		if !slices.Contains(mysqlTimes, c.Base) {
			return "not a time"
		}
		if r == Lease && c.Precision < 6 {
			return lossyLease(c.Precision)
		}
	case Queue:
		if !slices.Contains(mysqlTexts, c.Base) && c.Base != "binary" && c.Base != "varbinary" {
			return "not a string type"
		}
	case Payload:
		if !slices.Contains(mysqlTexts, c.Base) && !slices.Contains(mysqlBinaries, c.Base) && c.Base != "json" {
			return "neither bytes nor text"
		}
	case Headers, LastError:
		if !slices.Contains(mysqlTexts, c.Base) && c.Base != "json" {
			return "not text"
		}
	}
	return ""
}

// mysqlFix restates the column, as MODIFY must: the type the README gives the role, and the
// column's own nullability and AUTO_INCREMENT.
func mysqlFix(table, col string, r Role, c Column) string {
	null := " NULL"
	if c.NotNull {
		null = " NOT NULL"
	}
	var def string
	switch r {
	case ID:
		def = "BIGINT NOT NULL"
		if c.AutoIncrement {
			def += " AUTO_INCREMENT"
		}
	case Attempt, Priority:
		def = "INT" + null + " DEFAULT 0"
	case ProcessedAt, RetryAfter, DeadAt, Lease:
		def = "DATETIME(6)" + null
		if c.Base == "timestamp" {
			def = "TIMESTAMP(6)" + null
		}
	case Queue:
		def = "VARCHAR(191)" + null + " DEFAULT ''"
	case Payload:
		def = "LONGBLOB" + null
	default:
		def = "TEXT" + null
	}
	return "ALTER TABLE " + table + " MODIFY " + col + " " + def
}

func mysqlAdd(table, col string, r Role) string {
	def := mysqlDefinitions[r]
	if r == ID {
		def = "BIGINT AUTO_INCREMENT PRIMARY KEY"
	}
	return "ALTER TABLE " + table + " ADD COLUMN " + col + " " + def
}

// SQLite.
//
// Outside a STRICT table a column takes any value, and its affinity converts only text that
// reads as a number (the library's timestamps, "2006-01-02 15:04:05.000000", and its headers,
// a JSON object, never do), so timestamps and headers fit a column of any declared type there.
// A group or payload that looks like a number ("007", "1e3") would become one in a column of
// INTEGER, REAL or NUMERIC affinity, and an id, attempt or priority kept as text compares and
// sorts as text. A STRICT table refuses a value of another type than its column's, so there
// the library's text needs TEXT (or ANY).

func sqliteNeeds(r Role) string {
	switch r {
	case ID, Attempt, Priority:
		return "INTEGER affinity (a declared type containing INT, such as INTEGER)"
	case Queue:
		return "TEXT (or no declared type)"
	case Payload:
		return "BLOB or TEXT (or no declared type)"
	}
	return "TEXT (in a STRICT table; any declared type elsewhere)"
}

func sqliteFits(r Role, c Column, strict bool) string {
	switch r {
	case ID, Attempt, Priority:
		if c.Affinity != "INTEGER" {
			return "not of INTEGER affinity: SQLite keeps text in it as text, which compares and sorts as text"
		}
	case Queue, Payload:
		if strict {
			ok := []string{"TEXT", "ANY"}
			if r == Payload {
				ok = append(ok, "BLOB")
			}
			if !slices.Contains(ok, c.Base) {
				return "in a STRICT table, which refuses the library's values"
			}
		} else if c.Affinity != "TEXT" && c.Affinity != "BLOB" {
			return "which turns a value that looks like a number (\"007\", \"1e3\") into a number"
		}
	default: // timestamps and headers, which the library writes as text
		if strict && c.Base != "TEXT" && c.Base != "ANY" {
			return "in a STRICT table, which refuses the library's text"
		}
	}
	return ""
}

func sqliteDefinition(r Role) string {
	switch r {
	case ID:
		return "INTEGER PRIMARY KEY"
	case Attempt, Priority:
		return "INTEGER NOT NULL DEFAULT 0"
	case Queue:
		return "TEXT NOT NULL DEFAULT ''"
	case Payload:
		return "BLOB"
	}
	return "TEXT"
}

func sqliteFix(table, col string, r Role, _ Column) string {
	return "SQLite cannot change a column's type: rebuild the table with " + col + " " + sqliteDefinition(r) +
		" (create it under a new name, copy the rows of " + table + ", drop " + table + ", rename the new table)"
}

func sqliteAdd(table, col string, r Role) string {
	if r == ID {
		return "rebuild the table with " + col + " " + sqliteDefinition(r)
	}
	return "ALTER TABLE " + table + " ADD COLUMN " + col + " " + sqliteDefinition(r)
}
