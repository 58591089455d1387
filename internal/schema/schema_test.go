package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

var (
	postgres = dialect.Postgres[isolation.Default]{}
	mysql    = dialect.MySQL[isolation.Default]{}
	sqlite   = dialect.SQLite[isolation.Default]{}
)

func TestAffinityFollowsSQLitesRulesInOrder(t *testing.T) {
	for decl, want := range map[string]string{
		"INTEGER": "INTEGER", "BIGINT": "INTEGER", "int": "INTEGER", "POINT": "INTEGER", // "POINT" holds INT
		"TEXT": "TEXT", "VARCHAR(191)": "TEXT", "CLOB": "TEXT", "CHARINT": "INTEGER", // INT comes first
		"BLOB": "BLOB", "": "BLOB",
		"REAL": "REAL", "DOUBLE PRECISION": "REAL", "FLOAT": "REAL",
		"DATETIME": "NUMERIC", "NUMERIC": "NUMERIC", "DECIMAL(10,2)": "NUMERIC", "ANY": "NUMERIC", "TIMESTAMPTZ": "NUMERIC",
	} {
		if got := affinity(decl); got != want {
			t.Errorf("affinity(%q) = %s, want %s", decl, got, want)
		}
	}
}

// sqliteColumn is a column as readSQLite reads it.
func sqliteColumn(name, decl string) Column {
	return Column{Name: name, Type: decl, Base: strings.ToUpper(decl), Affinity: affinity(decl), Precision: -1}
}

func TestCheckRefusesWhatBreaksARoleAndOnlyThat(t *testing.T) {
	type tc struct {
		d      dialect.Dialect
		role   Role
		col    Column
		strict bool
		fix    string // "" when the column fits
	}
	pg := func(base, typ string, precision int) Column {
		return Column{Name: "c", Type: typ, Base: base, Precision: precision}
	}
	my := func(base, typ string, precision int, notNull bool) Column {
		return Column{Name: "c", Type: typ, Base: base, Precision: precision, NotNull: notNull}
	}
	for _, c := range []tc{
		{postgres, ID, pg("int8", "bigint", -1), false, ""},
		{postgres, ID, pg("text", "text", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE BIGINT USING "c"::BIGINT`},
		{postgres, ID, pg("numeric", "numeric(20,0)", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE BIGINT USING "c"::BIGINT`},
		{postgres, Attempt, pg("int2", "smallint", -1), false, ""},
		{postgres, Priority, pg("float8", "double precision", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE INTEGER USING "c"::INTEGER`},
		{postgres, RetryAfter, pg("timestamptz", "timestamp(0) with time zone", 0), false, ""}, // only the lease needs microseconds
		{postgres, ProcessedAt, pg("date", "date", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE TIMESTAMPTZ USING "c"::TIMESTAMPTZ`},
		{postgres, Lease, pg("timestamptz", "timestamp with time zone", 6), false, ""},
		{postgres, Lease, pg("timestamp", "timestamp without time zone", 6), false, ""},
		{postgres, Lease, pg("timestamptz", "timestamp(3) with time zone", 3), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE TIMESTAMPTZ`},
		{postgres, Lease, pg("timestamp", "timestamp(0) without time zone", 0), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE TIMESTAMP`},
		{postgres, Lease, pg("text", "text", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE TIMESTAMPTZ USING "c"::TIMESTAMPTZ`},
		{postgres, Queue, pg("varchar", "character varying(64)", -1), false, ""},
		{postgres, Queue, pg("int4", "integer", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE TEXT`},
		{postgres, Payload, pg("bytea", "bytea", -1), false, ""},
		{postgres, Payload, pg("jsonb", "jsonb", -1), false, ""},
		{postgres, Payload, pg("int4", "integer", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE BYTEA USING convert_to("c"::text, 'UTF8')`},
		{postgres, Headers, pg("bytea", "bytea", -1), false, `ALTER TABLE "t" ALTER COLUMN "c" TYPE TEXT`},

		{mysql, ID, my("bigint", "bigint(20) unsigned", -1, true), false, ""},
		{mysql, ID, Column{Name: "c", Type: "varchar(20)", Base: "varchar", Precision: -1, NotNull: true, AutoIncrement: false}, false, "ALTER TABLE `t` MODIFY `c` BIGINT NOT NULL"},
		{mysql, ID, Column{Name: "c", Type: "decimal(20,0)", Base: "decimal", Precision: -1, NotNull: true, AutoIncrement: true}, false, "ALTER TABLE `t` MODIFY `c` BIGINT NOT NULL AUTO_INCREMENT"},
		{mysql, Attempt, my("varchar", "varchar(10)", -1, true), false, "ALTER TABLE `t` MODIFY `c` INT NOT NULL DEFAULT 0"},
		{mysql, RetryAfter, my("datetime", "datetime", 0, false), false, ""},
		{mysql, Lease, my("datetime", "datetime(6)", 6, false), false, ""},
		{mysql, Lease, my("timestamp", "timestamp(6)", 6, false), false, ""},
		{mysql, Lease, my("datetime", "datetime", 0, false), false, "ALTER TABLE `t` MODIFY `c` DATETIME(6) NULL"},
		{mysql, Lease, my("timestamp", "timestamp(3)", 3, false), false, "ALTER TABLE `t` MODIFY `c` TIMESTAMP(6) NULL"},
		{mysql, ProcessedAt, my("varchar", "varchar(40)", -1, false), false, "ALTER TABLE `t` MODIFY `c` DATETIME(6) NULL"},
		{mysql, Queue, my("varbinary", "varbinary(64)", -1, true), false, ""},
		{mysql, Queue, my("int", "int(11)", -1, true), false, "ALTER TABLE `t` MODIFY `c` VARBINARY(764) NOT NULL DEFAULT ''"},
		{mysql, Payload, my("json", "json", -1, false), false, ""},
		{mysql, Payload, my("datetime", "datetime", 0, false), false, "ALTER TABLE `t` MODIFY `c` LONGBLOB NULL"},
		{mysql, Headers, my("longtext", "longtext", -1, false), false, ""},
		{mysql, Headers, my("blob", "blob", -1, false), false, "ALTER TABLE `t` MODIFY `c` TEXT NULL"},

		{sqlite, ID, sqliteColumn("c", "INTEGER"), false, ""},
		{sqlite, ID, sqliteColumn("c", "BIGINT"), false, ""},
		{sqlite, ID, sqliteColumn("c", "TEXT"), false, "rebuild the table with `c` INTEGER PRIMARY KEY"},
		{sqlite, Attempt, sqliteColumn("c", "NUMERIC"), false, "rebuild the table with `c` INTEGER NOT NULL DEFAULT 0"},
		{sqlite, ProcessedAt, sqliteColumn("c", "DATETIME"), false, ""}, // the library's text stays text
		{sqlite, Lease, sqliteColumn("c", "REAL"), false, ""},
		{sqlite, Lease, sqliteColumn("c", "INTEGER"), true, "rebuild the table with `c` TEXT"},
		{sqlite, Lease, sqliteColumn("c", "ANY"), true, ""},
		{sqlite, Headers, sqliteColumn("c", ""), false, ""},
		{sqlite, Queue, sqliteColumn("c", "VARCHAR(20)"), false, ""},
		{sqlite, Queue, sqliteColumn("c", ""), false, ""},
		{sqlite, Queue, sqliteColumn("c", "ANY"), false, "rebuild the table with `c` TEXT NOT NULL DEFAULT ''"}, // ANY is NUMERIC outside STRICT
		{sqlite, Queue, sqliteColumn("c", "ANY"), true, ""},
		{sqlite, Payload, sqliteColumn("c", "BLOB"), true, ""},
		{sqlite, Payload, sqliteColumn("c", "INTEGER"), false, "rebuild the table with `c` BLOB"},
	} {
		rs := Check(c.d, Table{Name: "t", Found: true, Strict: c.strict, Columns: []Column{c.col}}, []Named{{c.role, "c"}})
		r := rs[0]
		where := c.d.Name() + " " + c.role.String() + " " + r.Has
		switch {
		case c.fix == "" && !r.OK():
			t.Errorf("%s: refused (%s), want it to fit", where, r)
		case c.fix != "" && r.OK():
			t.Errorf("%s: fits, want it refused with %s", where, c.fix)
		case c.fix != "" && !strings.Contains(r.Fix, c.fix):
			t.Errorf("%s: fix %q, want %q", where, r.Fix, c.fix)
		case c.fix != "" && (r.Problem == "" || r.Needs == "" || !strings.Contains(r.String(), r.Has)):
			t.Errorf("%s: %q does not say what the column is and what it needs", where, r)
		}
	}
}

// TestCheckFlagsKeyColumnsThatCompareInexactly: a queue, kind, unique or group key column whose
// collation ignores case or trailing spaces fails the check with a fix that declares the exact
// type of the dialect (utf8mb4_nopad_bin on MariaDB, VARBINARY on MySQL), marked Inexact so that
// Open warns rather than refuses; a column that is not keyed is left alone whatever its collation.
func TestCheckFlagsKeyColumnsThatCompareInexactly(t *testing.T) {
	mariadb := dialect.MariaDB[isolation.Default]{}
	text := func(base, typ, collation string) Column {
		return Column{Name: "c", Type: typ, Base: base, Precision: -1, NotNull: true, Collation: collation}
	}
	for _, c := range []struct {
		d    dialect.Dialect
		role Role
		col  Column
		fix  string // empty: exact
	}{
		{mariadb, Kind, text("varchar", "varchar(191)", "utf8mb4_general_ci"), "ALTER TABLE `t` MODIFY `c` VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL DEFAULT ''"},
		{mariadb, Queue, text("varchar", "varchar(191)", "utf8mb4_uca1400_ai_ci"), "COLLATE utf8mb4_nopad_bin NOT NULL DEFAULT ''"},
		{mariadb, Queue, text("varchar", "varchar(191)", "utf8mb4_bin"), "COLLATE utf8mb4_nopad_bin"}, // pads
		{mariadb, GroupKey, text("char", "char(20)", "utf8mb4_nopad_bin"), "COLLATE utf8mb4_nopad_bin NULL"},
		{mariadb, UniqueKey, text("binary", "binary(20)", ""), "COLLATE utf8mb4_nopad_bin NULL"},
		{mysql, Kind, text("varchar", "varchar(191)", "utf8mb4_0900_ai_ci"), "ALTER TABLE `t` MODIFY `c` VARBINARY(764) NOT NULL DEFAULT ''"},
		{mariadb, Kind, text("varchar", "varchar(191)", "utf8mb4_nopad_bin"), ""},
		{mysql, Kind, text("varchar", "varchar(191)", "utf8mb4_0900_bin"), ""},
		{mysql, Queue, text("varbinary", "varbinary(764)", ""), ""},
		{mysql, Headers, text("text", "text", "utf8mb4_general_ci"), ""}, // not compared by key
		{postgres, Queue, Column{Name: "c", Type: "citext", Base: "citext", Precision: -1}, `ALTER TABLE "t" ALTER COLUMN "c" TYPE TEXT`},
		{postgres, Queue, Column{Name: "c", Type: "text", Base: "text", Precision: -1}, ""},
	} {
		r := Check(c.d, Table{Name: "t", Found: true, Columns: []Column{c.col}}, []Named{{c.role, "c"}})[0]
		where := c.d.Name() + " " + c.role.String() + " " + c.col.Type + " " + c.col.Collation
		switch {
		case c.fix == "" && !r.OK():
			t.Errorf("%s: flagged (%s), want it exact", where, r)
		case c.fix == "":
		case r.OK() || !r.Inexact:
			t.Errorf("%s: %+v, want it flagged as inexact", where, r)
		case !strings.Contains(r.Fix, c.fix):
			t.Errorf("%s: fix %q, want %q", where, r.Fix, c.fix)
		case !strings.Contains(r.String(), c.col.Type):
			t.Errorf("%s: %q does not name the column's type", where, r)
		}
	}
}

func TestCheckReportsEveryColumnInOrderAndTheMissingOnes(t *testing.T) {
	tbl := Table{Name: "jobs", Found: true, Columns: []Column{
		{Name: "id", Type: "text", Base: "text", Precision: -1},
		{Name: "payload", Type: "bytea", Base: "bytea", Precision: -1},
	}}
	desc := inbox.Table{Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt"}
	rs := Check(postgres, tbl, Describe(desc, "locked_until"))
	var got []string
	for _, r := range rs {
		got = append(got, r.Column+":"+map[bool]string{true: "ok", false: r.Problem}[r.OK()])
	}
	want := []string{"id:not an integer type", "payload:ok", "attempt:is missing", "locked_until:is missing"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Check: %v, want %v", got, want)
	}
	if rs[2].Fix != `ALTER TABLE "jobs" ADD COLUMN "attempt" INT NOT NULL DEFAULT 0` {
		t.Errorf("the fix of a missing attempt column: %q", rs[2].Fix)
	}
	if s := rs[1].String(); s != `column "payload" (Payload) is bytea: fits` {
		t.Errorf("a column that fits prints as %q", s)
	}
}

func TestColumnNamesMatchAsTheDatabaseComparesThem(t *testing.T) {
	tbl := Table{Name: "t", Found: true, Columns: []Column{{Name: "ID", Type: "bigint", Base: "bigint", Precision: -1}}}
	if r := Check(mysql, tbl, []Named{{ID, "id"}})[0]; !r.OK() {
		t.Errorf("MySQL: column id against ID: %s, want it found (MySQL column names ignore case)", r)
	}
	tbl.Columns[0].Base = "int8"
	if r := Check(postgres, tbl, []Named{{ID, "id"}})[0]; r.Problem != "is missing" {
		t.Errorf(`Postgres: column id against "ID": %s, want it missing (quoted names keep their case)`, r)
	}
}

// TestFitKindsCountsBytesOfAVarbinaryKindColumn: MySQL's exact kind column, VARBINARY(n), holds
// n bytes, so a kind of fewer characters but more bytes is refused at Open, as a kind longer
// than a VARCHAR(n)'s n characters is.
func TestFitKindsCountsBytesOfAVarbinaryKindColumn(t *testing.T) {
	desc := inbox.Table{Name: "jobs", Kind: "kind"}
	kind := strings.Repeat("é", 5) // 5 characters, 10 bytes
	for _, c := range []struct {
		col    Column
		refuse bool
	}{
		{Column{Name: "kind", Type: "varbinary(8)", Base: "varbinary"}, true},
		{Column{Name: "kind", Type: "varbinary(10)", Base: "varbinary"}, false},
		{Column{Name: "kind", Type: "varchar(5)", Base: "varchar"}, false},
		{Column{Name: "kind", Type: "varchar(4)", Base: "varchar"}, true},
	} {
		err := fitKinds(mysql, Table{Name: "jobs", Found: true, Columns: []Column{c.col}}, desc, []inbox.ClaimedKind{{Kind: kind}})
		if refused := errors.Is(err, inbox.ErrSchema); refused != c.refuse {
			t.Errorf("kind of 5 characters, 10 bytes, in %s: %v, want refused %v", c.col.Type, err, c.refuse)
		}
	}
}
