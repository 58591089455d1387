package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// capsCases are the four databases: their dialect at the default level, the other levels they
// open, and the record each must return.
var capsCases = []struct {
	name   string
	levels []string
	want   dialect.Caps
}{
	{"postgres", []string{"default", "read committed", "repeatable read", "serializable"}, dialect.Caps{
		Title: "Postgres", Quote: '"', MaxNameBytes: 63, NumberedParams: true,
		IDOnlyValue: "DEFAULT", ValuesDefault: true, NullsLast: true, Returning: true, UpdateFrom: true, SkipLocked: true,
		ConcatOperator: true, TextType: "TEXT", Strings: dialect.EscapeStrings, Locks: dialect.HashedLocks, IDListSettles: true,
		SnapshotLevels: []dialect.Level{dialect.LevelRepeatableRead, dialect.LevelSerializable}, PredicateLockLevels: []dialect.Level{dialect.LevelSerializable},
		Server: dialect.Floor{Major: 9, Minor: 5, Needs: "SKIP LOCKED"}, Advisory: dialect.Floor{Major: 11, Needs: "hashtextextended"},
		StatementLostCodes: []string{"26000", "42P05"}, Notifies: true,
		ClockQuery:    "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
		ConflictCodes: []string{"40001", "40P01"}, ConflictMarks: []string{"SQLSTATE 40001", "SQLSTATE 40P01"}, ConflictTries: 10,
		Catalog: dialect.PostgresCatalog, PartialIndexes: true, UpsertNothing: true, CaseSensitiveNames: true,
		UnflushedCommit: "(SELECT set_config('synchronous_commit', 'off', true)) = 'off'",
	}},
	{"mysql", mysqlFamilyLevels, wantMySQL},
	{"mariadb", mysqlFamilyLevels, wantMariaDB()},
	{"sqlite", []string{"default", "deferred", "immediate", "exclusive"}, dialect.Caps{
		Title: "SQLite", Quote: '`', TimeLayout: dialect.SQLiteTimeLayout, IDOnlyValue: "NULL", Returning: true,
		ConcatOperator: true, TextType: "TEXT", Strings: dialect.StandardStrings, OneWriter: true, BeginsByStatement: true,
		IDListSettles: true, LazyCompile: true, InListTempIndex: true,
		Server:        dialect.Floor{Major: 3, Minor: 35, Needs: "RETURNING"},
		ClockQuery:    "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
		ConflictMarks: []string{"SQLITE_BUSY", "database is locked"}, ConflictTries: 5,
		Catalog: dialect.SQLiteCatalog, PartialIndexes: true, UpsertNothing: true, InsertValues: 1000,
	}},
}

// mysqlFamilyLevels are the levels MySQL and MariaDB open.
var mysqlFamilyLevels = []string{"default", "read uncommitted", "read committed", "repeatable read", "serializable"}

// wantMySQL is the record MySQL must return.
var wantMySQL = dialect.Caps{
	Title: "MySQL", Quote: '`', MaxNameChars: 64, IDOnlyValue: "DEFAULT", ValuesDefault: true, SkipLocked: true, TextType: "CHAR",
	Strings: dialect.HexStrings, Locks: dialect.NamedLocks, LockNameMaxChars: 64, DefaultReadCommitted: true,
	SessionLevelQueries: []string{"SELECT @@SESSION.transaction_isolation", "SELECT @@SESSION.tx_isolation"},
	Server:              dialect.Floor{Major: 8, Patch: 1, Needs: "SKIP LOCKED"},
	ClockQuery:          "SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')",
	ConflictMarks:       []string{"Error 1213", "Error 1205"}, ConflictTries: 10, Catalog: dialect.MySQLCatalog, Clusters: true,
	HolderLock: " LOCK IN SHARE MODE",
}

// wantMariaDB is the record MariaDB must return: MySQL's but for its title, the order in which
// it tries the session level's variables (its own tx_isolation first), its server floor, and
// its NO PAD binary collation.
func wantMariaDB() dialect.Caps {
	c := wantMySQL
	c.Title = "MariaDB"
	c.NoPadBinary = "utf8mb4_nopad_bin"
	c.SessionLevelQueries = []string{"SELECT @@SESSION.tx_isolation", "SELECT @@SESSION.transaction_isolation"}
	c.Server = dialect.Floor{Major: 10, Minor: 6, Needs: "SKIP LOCKED"}
	return c
}

// TestCapsRecords pins each database's record, and checks that every level of a database,
// typed or chosen at run time, returns the one shared record.
func TestCapsRecords(t *testing.T) {
	for _, tc := range capsCases {
		t.Run(tc.name, func(t *testing.T) {
			base := parsed(t, tc.name, "default")
			if got := base.Caps(); !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("Caps() = %+v\nwant      %+v", *got, tc.want)
			}
			for _, level := range tc.levels {
				d := parsed(t, tc.name, level)
				if d.Caps() != base.Caps() {
					t.Errorf("at %s Caps() returns another record than at the default level", level)
				}
				if typed := d.Dialect.Caps(); typed != base.Caps() {
					t.Errorf("the typed dialect at %s returns another record than its Runtime", level)
				}
			}
		})
	}
}

// TestCapsAgreeWithTheDialect checks each record's answers against what its dialect does:
// quoting, placeholders, bound times, transactions, the server check, conflicts, the forms a
// Runtime allows, and the levels the level-dependent facts name.
func TestCapsAgreeWithTheDialect(t *testing.T) {
	for _, tc := range capsCases {
		t.Run(tc.name, func(t *testing.T) {
			d := parsed(t, tc.name, "default")
			c := d.Caps()

			q := string(c.Quote)
			if got, err := d.Quote("a" + q + "b"); err != nil || got != q+"a"+q+q+"b"+q {
				t.Errorf("Quote(%q) = %s, %v; want it inside %s with the inner quote doubled", "a"+q+"b", got, err, q)
			}
			for _, limit := range []struct {
				n    int
				unit string
			}{{c.MaxNameBytes, "a"}, {c.MaxNameChars, "é"}} {
				if limit.n == 0 {
					continue
				}
				if _, err := d.Quote(strings.Repeat(limit.unit, limit.n)); err != nil {
					t.Errorf("Quote of %d × %q: %v, want it kept", limit.n, limit.unit, err)
				}
				if _, err := d.Quote(strings.Repeat(limit.unit, limit.n+1)); err == nil {
					t.Errorf("Quote of %d × %q passed, want it refused", limit.n+1, limit.unit)
				}
			}
			if c.MaxNameBytes == 0 && c.MaxNameChars == 0 {
				if _, err := d.Quote(strings.Repeat("é", 500)); err != nil {
					t.Errorf("Quote of 500 characters: %v, want no length limit", err)
				}
			}
			if c.MaxNameBytes == 0 && c.MaxNameChars != 0 {
				// Characters, not bytes: a name of the limit's characters in twice the bytes.
				if _, err := d.Quote(strings.Repeat("é", c.MaxNameChars)); err != nil {
					t.Errorf("Quote of %d two-byte characters: %v, want it kept", c.MaxNameChars, err)
				}
			}

			if got, want := d.Placeholder(2), "?"; c.NumberedParams && got != "$2" || !c.NumberedParams && got != want {
				t.Errorf("Placeholder(2) = %s with NumberedParams %v", got, c.NumberedParams)
			}

			at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("x", 3600))
			switch got := d.Time(at).(type) {
			case string:
				if c.TimeLayout == "" || got != at.UTC().Format(c.TimeLayout) {
					t.Errorf("Time bound as text %q, TimeLayout %q", got, c.TimeLayout)
				}
			case time.Time:
				if c.TimeLayout != "" || !got.Equal(at.Truncate(time.Microsecond)) || got.Location() != time.UTC {
					t.Errorf("Time bound as %v, TimeLayout %q: want UTC to the microsecond", got, c.TimeLayout)
				}
			default:
				t.Errorf("Time bound as a %T", got)
			}

			opts := dialect.TxOptions(d)
			switch {
			case c.BeginsByStatement && opts != nil:
				t.Errorf("TxOptions = %+v, want none: the dialect begins by statement", opts)
			case c.DefaultReadCommitted && (opts == nil || opts.Isolation != sql.LevelReadCommitted):
				t.Errorf("TxOptions at the default level = %+v, want READ COMMITTED", opts)
			case !c.BeginsByStatement && !c.DefaultReadCommitted && opts != nil:
				t.Errorf("TxOptions at the default level = %+v, want none (a plain BEGIN)", opts)
			}
			_, tx := (&fakeDB{}).begin(t, context.Background(), d)
			if rebinds := tx.StmtContext(context.Background(), &sql.Stmt{}) != nil; rebinds == c.BeginsByStatement {
				t.Errorf("Begin returned a %T that rebinds prepared statements: %v, with BeginsByStatement %v", tx, rebinds, c.BeginsByStatement)
			}
			tx.Rollback()

			floor := c.Server
			older := olderThan(floor)
			if err := d.CheckServer(context.Background(), versionDB(t, tc.name, floor)); err != nil {
				t.Errorf("CheckServer on %d.%d.%d (the floor): %v", floor.Major, floor.Minor, floor.Patch, err)
			}
			if err := d.CheckServer(context.Background(), versionDB(t, tc.name, older)); !errors.Is(err, inbox.ErrServerTooOld) || !strings.Contains(err.Error(), floor.Needs) {
				t.Errorf("CheckServer on %d.%d.%d (below the floor): %v, want ErrServerTooOld naming %s", older.Major, older.Minor, older.Patch, err, floor.Needs)
			}

			for _, code := range c.ConflictCodes {
				if !d.Retryable(fmt.Errorf("claim: %w", sqlState(code))) {
					t.Errorf("Retryable(SQLSTATE %s) = false", code)
				}
			}
			for _, mark := range c.ConflictMarks {
				if !d.Retryable(errors.New("server says: " + mark + " (and more)")) {
					t.Errorf("Retryable(%q) = false", mark)
				}
			}

			if err := d.Allows(dialect.RowLockForm); (err == nil) != c.SkipLocked {
				t.Errorf("Allows(rowlock) = %v with SkipLocked %v", err, c.SkipLocked)
			}
			if err := d.Allows(dialect.AdvisoryForm); (err == nil) != (c.Locks != dialect.NoSessionLocks) {
				t.Errorf("Allows(advisory) = %v with Locks %v", err, c.Locks)
			}
			if (c.Locks == dialect.NamedLocks) != (c.LockNameMaxChars > 0) {
				t.Errorf("Locks %v with LockNameMaxChars %d: named locks need a limit, others have none", c.Locks, c.LockNameMaxChars)
			}

			for _, level := range append(append([]dialect.Level(nil), c.SnapshotLevels...), c.PredicateLockLevels...) {
				if _, err := dialect.Parse(tc.name, string(level)); err != nil {
					t.Errorf("a level-dependent fact names %q, which %s does not open: %v", level, tc.name, err)
				}
			}
		})
	}
}

// parsed is the Runtime dialect of database name at level.
func parsed(t *testing.T, name, level string) dialect.Runtime {
	t.Helper()
	d, err := dialect.Parse(name, level)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", name, level, err)
	}
	return d
}

// olderThan is a release just before f.
func olderThan(f dialect.Floor) dialect.Floor {
	switch {
	case f.Patch > 0:
		f.Patch--
	case f.Minor > 0:
		f.Minor, f.Patch = f.Minor-1, 99
	default:
		f.Major, f.Minor, f.Patch = f.Major-1, 99, 99
	}
	return f
}

// versionDB is a database that answers the version queries of database name as release v.
func versionDB(t *testing.T, name string, v dialect.Floor) *sql.DB {
	text := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	answers := map[string]string{}
	switch name {
	case "postgres":
		num := v.Major*10000 + v.Minor // 10 and later: major and minor
		if v.Major < 10 {
			num = v.Major*10000 + v.Minor*100 + v.Patch
		}
		answers["SHOW server_version_num"] = fmt.Sprint(num)
	case "mariadb":
		answers["SELECT VERSION()"] = text + "-MariaDB"
	case "mysql":
		answers["SELECT VERSION()"] = text
	case "sqlite":
		answers["SELECT sqlite_version()"] = text
	}
	return (&fakeDB{answers: answers}).open(t)
}
