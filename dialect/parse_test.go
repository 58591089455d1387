package dialect_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

func TestParse(t *testing.T) {
	valid := []struct {
		name, level         string
		wantName, wantLevel string
	}{
		{"postgres", "", "postgres", "default"},
		{"PostgreSQL", "default", "postgres", "default"},
		{"pgx", "read committed", "postgres", "read committed"},
		{"postgres", "REPEATABLE_READ", "postgres", "repeatable read"},
		{"postgres", "serializable", "postgres", "serializable"},
		{"mysql", "", "mysql", "default"},
		{"mysql", "read uncommitted", "mysql", "read uncommitted"},
		{"mysql", "read_committed", "mysql", "read committed"},
		{"mysql", "repeatable read", "mysql", "repeatable read"},
		{"mysql", "serializable", "mysql", "serializable"},
		{"mariadb", "", "mariadb", "default"},
		{"MariaDB", "read uncommitted", "mariadb", "read uncommitted"},
		{"mariadb", "serializable", "mariadb", "serializable"},
		{" sqlite ", "", "sqlite", "default"},
		{"sqlite3", "deferred", "sqlite", "deferred"},
		{"sqlite", " Immediate ", "sqlite", "immediate"},
		{"sqlite", "exclusive", "sqlite", "exclusive"},
	}
	for _, tt := range valid {
		d, err := dialect.Parse(tt.name, tt.level)
		if err != nil {
			t.Errorf("Parse(%q, %q): %v", tt.name, tt.level, err)
			continue
		}
		if d.Name() != tt.wantName || d.Level() != dialect.Level(tt.wantLevel) {
			t.Errorf("Parse(%q, %q) = %s at %s, want %s at %s", tt.name, tt.level, d.Name(), d.Level(), tt.wantName, tt.wantLevel)
		}
	}

	invalid := []struct {
		name, level string
		mention     []string // what the message must name
	}{
		{"postgres", "read uncommitted", []string{"postgres", "read uncommitted"}},
		{"postgres", "immediate", []string{"postgres", "immediate"}},
		{"mysql", "deferred", []string{"mysql", "deferred"}},
		{"mariadb", "exclusive", []string{"mariadb", "exclusive"}},
		{"sqlite", "serializable", []string{"sqlite", "serializable"}},
		{"sqlite", "read committed", []string{"sqlite", "read committed"}},
		{"postgres", "snapshot", []string{"postgres", "snapshot"}},
		{"oracle", "", []string{"oracle"}},
	}
	for _, tt := range invalid {
		d, err := dialect.Parse(tt.name, tt.level)
		if err == nil {
			t.Errorf("Parse(%q, %q) = %s at %s, want an error", tt.name, tt.level, d.Name(), d.Level())
			continue
		}
		if !errors.Is(err, inbox.ErrDialect) {
			t.Errorf("Parse(%q, %q): %v does not wrap inbox.ErrDialect", tt.name, tt.level, err)
		}
		for _, m := range tt.mention {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("Parse(%q, %q): %q does not name %q", tt.name, tt.level, err, m)
			}
		}
	}
}

func TestRuntimeAllows(t *testing.T) {
	for _, level := range []string{"default", "deferred", "immediate", "exclusive"} {
		d, err := dialect.Parse("sqlite", level)
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range []dialect.Form{dialect.RowLockForm, dialect.AdvisoryForm} {
			err := d.Allows(form)
			if !errors.Is(err, inbox.ErrDialect) {
				t.Errorf("SQLite at %s allows %s: %v, want an error wrapping inbox.ErrDialect", level, form, err)
				continue
			}
			for _, m := range []string{form.String(), "SQLite", level, "lease"} {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("SQLite at %s, %s: %q does not name %q", level, form, err, m)
				}
			}
		}
		if err := d.Allows(dialect.LeaseForm); err != nil {
			t.Errorf("SQLite at %s refuses the lease form: %v", level, err)
		}
	}
	for _, name := range []string{"postgres", "mysql", "mariadb"} {
		d, err := dialect.Parse(name, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range []dialect.Form{dialect.RowLockForm, dialect.LeaseForm, dialect.AdvisoryForm} {
			if err := d.Allows(form); err != nil {
				t.Errorf("%s refuses the %s form: %v", name, form, err)
			}
		}
	}
	// The typed dialects were checked by the compiler.
	for _, d := range []dialect.Dialect{dialect.SQLite[isolation.Default]{}, dialect.Postgres[isolation.Default]{}} {
		if err := d.Allows(dialect.LeaseForm); err != nil {
			t.Errorf("%s: Allows(lease) = %v", d.Name(), err)
		}
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		answers map[string]string
		want    string
	}{
		{map[string]string{"SELECT VERSION()": "PostgreSQL 15.14 (Debian 15.14-0+deb12u1) on x86_64-pc-linux-gnu"}, "postgres"},
		{map[string]string{"SELECT VERSION()": "8.0.36"}, "mysql"},
		{map[string]string{"SELECT VERSION()": "10.11.14-MariaDB-0+deb12u2"}, "mariadb"},
		{map[string]string{"SELECT sqlite_version()": "3.46.1"}, "sqlite"},
	}
	for _, tt := range tests {
		d, err := dialect.Detect(context.Background(), (&fakeDB{answers: tt.answers}).open(t))
		if err != nil {
			t.Errorf("Detect with %v: %v", tt.answers, err)
			continue
		}
		if d.Name() != tt.want || d.Level() != "default" {
			t.Errorf("Detect with %v = %s at %s, want %s at default", tt.answers, d.Name(), d.Level(), tt.want)
		}
	}

	t.Run("sqlite runtime refuses row locks", func(t *testing.T) {
		d, err := dialect.Detect(context.Background(), (&fakeDB{answers: map[string]string{"SELECT sqlite_version()": "3.46.1"}}).open(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Allows(dialect.RowLockForm); !errors.Is(err, inbox.ErrDialect) {
			t.Errorf("Allows(rowlock) on a detected SQLite = %v, want inbox.ErrDialect", err)
		}
	})

	t.Run("no answer", func(t *testing.T) {
		_, err := dialect.Detect(context.Background(), (&fakeDB{}).open(t))
		if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "dialect.Parse") {
			t.Errorf("Detect on a database answering neither version query: %v, want inbox.ErrDialect pointing to dialect.Parse", err)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		down := errors.New("connection refused")
		_, err := dialect.Detect(context.Background(), (&fakeDB{connectErr: down}).open(t))
		if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("Detect on an unreachable database: %v, want inbox.ErrDialect with the cause", err)
		}
	})
}

func TestCheckServer(t *testing.T) {
	for _, tt := range []struct {
		d        dialect.Dialect
		query    string           // how d asks the server's version
		versions map[string]error // the server's answer -> what CheckServer returns (nil: passes)
	}{
		{dialect.Postgres[isolation.Default]{}, "SHOW server_version_num", map[string]error{
			"150014": nil, "90500": nil, "90424": inbox.ErrServerTooOld,
		}},
		{dialect.MySQL[isolation.Default]{}, "SELECT VERSION()", map[string]error{
			"8.0.1": nil, "8.4.2-log": nil, "8.0.0-dmr": inbox.ErrServerTooOld, "5.7.44": inbox.ErrServerTooOld,
			// A MariaDB server stands in for MySQL under the MySQL dialect.
			"10.11.14-MariaDB-0+deb12u2": nil, "10.5.27-MariaDB": inbox.ErrServerTooOld,
		}},
		{dialect.MariaDB[isolation.Default]{}, "SELECT VERSION()", map[string]error{
			"10.6.0-MariaDB": nil, "11.4.3-MariaDB-ubu2404": nil, "10.5.27-MariaDB": inbox.ErrServerTooOld,
			// A MariaDB dialect on MySQL is the wrong database, whatever its version.
			"8.0.36": inbox.ErrDialect,
		}},
		{dialect.SQLite[isolation.Default]{}, "SELECT sqlite_version()", map[string]error{
			"3.35.0": nil, "3.34.1": inbox.ErrServerTooOld,
		}},
	} {
		for version, want := range tt.versions {
			err := tt.d.CheckServer(context.Background(), (&fakeDB{answers: map[string]string{tt.query: version}}).open(t))
			switch {
			case want == nil && err != nil:
				t.Errorf("%s on %s %q: %v, want it to pass", tt.d.Name(), tt.query, version, err)
			case want != nil && !errors.Is(err, want):
				t.Errorf("%s on %s %q: %v, want an error wrapping %v", tt.d.Name(), tt.query, version, err, want)
			}
		}
	}
}

// TestRetryable: each dialect takes its own database's conflicts for transient, by SQLSTATE
// or by the driver's text, and nothing else: not another database's, not a broken connection.
func TestRetryable(t *testing.T) {
	tests := []struct {
		err error
		on  string // the databases whose conflict it is, space-separated
	}{
		{nil, ""},
		{sqlState("40001"), "postgres"},
		{sqlState("40P01"), "postgres"},
		{fmt.Errorf("claiming: %w", sqlState("40001")), "postgres"},
		{sqlState("23505"), ""},
		{errors.New("ERROR: could not serialize access due to concurrent update (SQLSTATE 40001)"), "postgres"},
		{errors.New("ERROR: deadlock detected (SQLSTATE 40P01)"), "postgres"},
		{errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"), "mysql mariadb"},
		{errors.New("Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction"), "mysql mariadb"},
		{errors.New("Error 1062 (23000): Duplicate entry '1' for key 'PRIMARY'"), ""},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), "sqlite"},
		{errors.New("database is locked"), "sqlite"},
		{errors.New("no such table: jobs"), ""},
		{driver.ErrBadConn, ""},
		{fmt.Errorf("exec: %w", driver.ErrBadConn), ""},
		{context.Canceled, ""},
	}
	for _, d := range []dialect.Dialect{
		dialect.Postgres[isolation.Default]{}, dialect.MySQL[isolation.Default]{},
		dialect.MariaDB[isolation.Default]{}, dialect.SQLite[isolation.Default]{},
	} {
		for _, tt := range tests {
			want := slices.Contains(strings.Fields(tt.on), d.Name())
			if got := d.Retryable(tt.err); got != want {
				t.Errorf("%s: Retryable(%v) = %v, want %v", d.Name(), tt.err, got, want)
			}
		}
	}
}

// sqlState is an error carrying a SQLSTATE the way pgx's and lib/pq's errors do.
type sqlState string

func (s sqlState) Error() string    { return "server error" }
func (s sqlState) SQLState() string { return string(s) }
