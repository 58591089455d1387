package schema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// rules are one database's answers: what a role needs, whether a column fits it (the problem,
// or ""), whether a keyed column of a type that fits compares exactly (the problem, or ""), and
// the statement that fixes a column that does not fit. Table and column names come quoted. The
// statement that adds a missing column is add's, from the definitions.
type rules struct {
	needs func(r Role) string
	fits  func(r Role, c Column, strict bool) string
	exact func(r Role, c Column) string
	fix   func(table, col string, r Role, c Column) string
}

func rulesOf(d dialect.Dialect) rules {
	switch d.Caps().Catalog {
	case dialect.PostgresCatalog:
		return rules{postgresTypes.needs, postgresTypes.fits, postgresExact, postgresFix}
	case dialect.SQLiteCatalog:
		// SQLite's default collation, BINARY, compares bytes; pragma_table_info does not tell
		// a column declared COLLATE NOCASE or RTRIM, so none is flagged.
		return rules{sqliteNeeds, sqliteFits, func(Role, Column) string { return "" }, sqliteFix}
	}
	caps := d.Caps()
	return rules{mysqlTypes.needs, mysqlTypes.fits, mysqlExact, func(table, col string, r Role, c Column) string {
		return mysqlFix(caps, table, col, r, c)
	}}
}

// keyed reports whether the library compares role r's column by key, with = and IN (a queue, a
// kind, a unique or group key): such a column must compare byte for byte, or a consumer claims
// rows of queues and kinds it does not run and keys collide (see mysqlKeyDefinition).
func keyed(r Role) bool { return kindOf(r) == kindQueue }

// inexactly is the problem of a keyed column of role r that compares text inexactly; how says how.
func inexactly(r Role, how string) string {
	harm := map[Role]string{
		Queue:     "a consumer of queue \"Billing\" would claim the rows of \"billing\"",
		Kind:      "a consumer of kind \"alpha\" would claim rows of \"Alpha\" and \"alpha \", kinds it does not run",
		UniqueKey: "keys \"K\" and \"k\" would collide",
		GroupKey:  "groups \"A\" and \"a\" would share one hold",
		LimitKey:  "limit keys \"A\" and \"a\" would share one limit",
	}[r]
	return how + ": " + harm
}

// postgresExact flags a citext column, which compares without regard to case. (A column of a
// nondeterministic collation, Postgres 12 and later, is not read from the catalog.)
func postgresExact(r Role, c Column) string {
	if keyed(r) && c.Base == "citext" {
		return inexactly(r, "which compares without regard to case")
	}
	return ""
}

// mysqlExact flags a keyed column that does not compare byte for byte on MySQL and MariaDB: a
// CHAR, which drops trailing spaces; a BINARY, which pads with zero bytes; a text column of a
// collation other than a NO PAD binary one (MariaDB's *_nopad_bin, MySQL's utf8mb4_0900_bin),
// such as the servers' defaults, which ignore case (utf8mb4_general_ci, utf8mb4_uca1400_ai_ci)
// and trailing spaces, or utf8mb4_bin, which ignores trailing spaces. VARBINARY and BLOB
// compare bytes.
func mysqlExact(r Role, c Column) string {
	switch {
	case !keyed(r), c.Base == "varbinary", c.Base == "blob", c.Base == "tinyblob":
		return ""
	case c.Base == "char":
		return inexactly(r, "which drops trailing spaces")
	case c.Base == "binary":
		return inexactly(r, "which pads with zero bytes")
	case strings.HasSuffix(c.Collation, "_nopad_bin"), c.Collation == "utf8mb4_0900_bin", c.Collation == "binary":
		return ""
	case strings.HasSuffix(c.Collation, "_bin"):
		return inexactly(r, "of collation "+c.Collation+", which ignores trailing spaces")
	}
	return inexactly(r, "of collation "+c.Collation+", which ignores case or trailing spaces")
}

// kind is what a role's column holds, which decides the types it takes on every database.
type kind int

const (
	kindInteger kind = iota // ID, Attempt, Priority
	kindTime                // ProcessedAt, RetryAfter, DeadAt, CreatedAt, CancelledAt
	kindLease               // the lease column: a time kept to the microsecond
	kindQueue
	kindPayload
	kindText // Headers, LastError
)

func kindOf(r Role) kind {
	switch r {
	case ID, Attempt, Priority:
		return kindInteger
	case ProcessedAt, RetryAfter, DeadAt, CreatedAt, CancelledAt:
		return kindTime
	case Lease:
		return kindLease
	case Queue, Kind, UniqueKey, GroupKey, LimitKey:
		return kindQueue
	case Payload:
		return kindPayload
	}
	return kindText
}

// typeNames are, on a database whose catalog names each column's type (Postgres, MySQL and
// MariaDB), the types each kind of column takes.
type typeNames map[kind]takes

// takes is what one kind of column takes: the types it needs, in words; the problem of a column
// of another type; and the types that fit, by their catalog's base name.
type takes struct {
	needs, not string
	types      []string
}

func (n typeNames) needs(r Role) string { return n[kindOf(r)].needs }

func (n typeNames) fits(r Role, c Column, _ bool) string {
	k := kindOf(r)
	if !slices.Contains(n[k].types, c.Base) {
		return n[k].not
	}
	if k == kindLease && c.Precision < 6 {
		return lossyLease(c.Precision)
	}
	return ""
}

// lossyLease is the problem of a lease column that drops fractional seconds.
func lossyLease(precision int) string {
	return fmt.Sprintf("which keeps %d fractional digits of a second: the lease token is compared to the microsecond, so every extension and settlement would find its lease lost", precision)
}

// Postgres.

var (
	postgresTimes = []string{"timestamptz", "timestamp"}
	postgresTexts = []string{"text", "varchar", "bpchar", "citext", "name"}
	postgresJSON  = []string{"json", "jsonb"}
)

var postgresTypes = typeNames{
	kindInteger: {"an integer type (SMALLINT, INTEGER or BIGINT)", "not an integer type", []string{"int2", "int4", "int8"}},
	kindTime:    {"a timestamp (TIMESTAMPTZ, or TIMESTAMP)", "not a timestamp", postgresTimes},
	kindLease:   {"a timestamp that keeps microseconds (TIMESTAMPTZ or TIMESTAMP, with no precision below 6)", "not a timestamp", postgresTimes},
	kindQueue:   {"a text type (TEXT, VARCHAR or CHAR)", "not a text type", postgresTexts},
	kindPayload: {"bytes or text (BYTEA, TEXT, VARCHAR, JSON or JSONB)", "neither bytes nor text", slices.Concat(postgresTexts, postgresJSON, []string{"bytea"})},
	kindText:    {"text (TEXT, VARCHAR, JSON or JSONB)", "not text", slices.Concat(postgresTexts, postgresJSON)},
}

// postgresType is the type a fix gives a column of role r that has type c (a timestamp keeps
// its kind, with or without time zone).
func postgresType(r Role, c Column) string {
	switch r {
	case ID:
		return "BIGINT"
	case Attempt, Priority:
		return "INTEGER"
	case ProcessedAt, RetryAfter, DeadAt, CreatedAt, CancelledAt, Lease:
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

// MySQL and MariaDB.

var (
	mysqlTimes    = []string{"datetime", "timestamp"}
	mysqlTexts    = []string{"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
	mysqlBinaries = []string{"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
)

var mysqlTypes = typeNames{
	kindInteger: {"an integer type (INT, BIGINT, …)", "not an integer type", []string{"tinyint", "smallint", "mediumint", "int", "bigint"}},
	kindTime:    {"a time (DATETIME(6), or TIMESTAMP)", "not a time", mysqlTimes},
	kindLease:   {"a time that keeps microseconds (DATETIME(6), or TIMESTAMP(6))", "not a time", mysqlTimes},
	kindQueue: {"a string type that compares byte for byte (VARCHAR or TEXT of a NO PAD binary collation: utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL 8.0.17 and later; or VARBINARY)",
		"not a string type", slices.Concat(mysqlTexts, []string{"binary", "varbinary"})},
	kindPayload: {"bytes or text (LONGBLOB, BLOB, VARBINARY, TEXT, JSON, …)", "neither bytes nor text", slices.Concat(mysqlTexts, mysqlBinaries, []string{"json"})},
	kindText:    {"text (TEXT, VARCHAR or JSON)", "not text", slices.Concat(mysqlTexts, []string{"json"})},
}

// mysqlFix restates the column, as MODIFY must: the type the README gives the role (a keyed
// role's compares byte for byte, sqltext.KeyText), and the column's own nullability and
// AUTO_INCREMENT.
func mysqlFix(caps *dialect.Caps, table, col string, r Role, c Column) string {
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
	case ProcessedAt, RetryAfter, DeadAt, CreatedAt, CancelledAt, Lease:
		def = "DATETIME(6)" + null
		if c.Base == "timestamp" {
			def = "TIMESTAMP(6)" + null
		}
	case Queue, Kind:
		def = sqltext.KeyText(caps, 191) + null + " DEFAULT ''"
	case UniqueKey, GroupKey, LimitKey:
		def = sqltext.KeyText(caps, 191) + " NULL"
	case Payload:
		def = "LONGBLOB" + null
	default:
		def = "TEXT" + null
	}
	return "ALTER TABLE " + table + " MODIFY " + col + " " + def
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
	case Queue, Kind, UniqueKey, GroupKey, LimitKey:
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
	case Queue, Kind, UniqueKey, GroupKey, LimitKey, Payload:
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
	case Queue, Kind:
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

// add is the statement that adds the missing column col of role r to table on d's database,
// with the definition the README gives it; an id's is generated, since the rows already there
// need one each. SQLite cannot add a primary key column, so for an id there it says to rebuild
// the table.
func add(d dialect.Dialect, table, col string, r Role) string {
	def := definition(d, r, true)
	if r == ID && d.Caps().Catalog == dialect.SQLiteCatalog {
		return "rebuild the table with " + col + " " + def
	}
	return "ALTER TABLE " + table + " ADD COLUMN " + col + " " + def
}
