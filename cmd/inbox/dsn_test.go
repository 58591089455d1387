package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestParseDSNPicksDriverAndDialectByScheme(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, c := range []struct {
		dsn, driver, dialect, source string
	}{
		{"postgres://u@h:5432/db?sslmode=disable", "pgx", "postgres", "postgres://u@h:5432/db?sslmode=disable"},
		{"postgresql://u@h/db", "pgx", "postgres", "postgresql://u@h/db"},
		{"postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write", "pgx", "postgres", "postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write"},
		{"mysql://root@tcp(127.0.0.1:3306)/test", "mysql", "mysql", "root@tcp(127.0.0.1:3306)/test"},
		{"mariadb://root:pw@tcp(127.0.0.1:3306)/test?timeout=1s", "mysql", "mariadb", "root:pw@tcp(127.0.0.1:3306)/test?timeout=1s"},
		{"mariadb://app@unix(/run/mysqld/mysqld.sock)/test", "mysql", "mariadb", "app@unix(/run/mysqld/mysqld.sock)/test"},
		{"sqlite:///tmp/a.db", "sqlite", "sqlite", "file:/tmp/a.db?_pragma=journal_mode%28WAL%29&_pragma=busy_timeout%2810000%29&_pragma=synchronous%28NORMAL%29"},
		{"sqlite://rel/a.db?_pragma=busy_timeout(1)", "sqlite", "sqlite", "file:" + abs("rel/a.db") + "?_pragma=busy_timeout%281%29&_pragma=journal_mode%28WAL%29&_pragma=synchronous%28NORMAL%29"},
		{"file:a.db?_pragma=journal_mode(DELETE)", "sqlite", "sqlite", "file:a.db?_pragma=journal_mode%28DELETE%29&_pragma=busy_timeout%2810000%29&_pragma=synchronous%28NORMAL%29"},
		{"data/app.db", "sqlite", "sqlite", "file:" + abs("data/app.db") + "?_pragma=journal_mode%28WAL%29&_pragma=busy_timeout%2810000%29&_pragma=synchronous%28NORMAL%29"},
		{"C:app.db", "sqlite", "sqlite", "file:" + abs("C:app.db") + "?_pragma=journal_mode%28WAL%29&_pragma=busy_timeout%2810000%29&_pragma=synchronous%28NORMAL%29"},
	} {
		got, err := parseDSN(c.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", c.dsn, err)
			continue
		}
		if got.driver != c.driver || got.dialect.Name() != c.dialect || got.source != c.source {
			t.Errorf("parseDSN(%q) = driver %s, dialect %s, source %q; want %s, %s, %q", c.dsn, got.driver, got.dialect.Name(), got.source, c.driver, c.dialect, c.source)
		}
	}
}

// TestParseDSNRefuses checks that a DSN of another scheme, or one its driver would misread, is
// refused with an error that says what to write, and shows no password.
func TestParseDSNRefuses(t *testing.T) {
	for _, c := range []struct{ dsn, says string }{
		{"", schemesAccepted},
		{"pg://u:s3cret@h/db", "unknown scheme pg: use " + schemesAccepted},
		{"postgress://u:s3cret@h/db", "unknown scheme postgress: use " + schemesAccepted},
		{"http://u:s3cret@h/db", "unknown scheme http"},
		{"sqlite3://x.db", "unknown scheme sqlite3"},
		{"my:file.db", "a file path with a colon goes as sqlite://path"},
		{"postgres:u:s3cret@h/db", "write postgres://"},
		{"mysql:root:s3cret@tcp(h:3306)/db", "write mysql://"},
		{"sqlite:x.db", "write sqlite://path or file:path"},
		{"sqlite://", "no file path"},
		{"mysql://root:s3cret@h:3306/db", "after mysql:// comes go-sql-driver/mysql's DSN, user:password@tcp(host:3306)/dbname"},
		{"mariadb://root:s3cret@tcp(h:3306)", "after mariadb:// comes go-sql-driver/mysql's DSN"},
		{"postgres://u:s3c@ret@h/db", "must be percent-encoded (%40, %2F)"},
		{"postgres://u:s3c/ret@h/db", "must be percent-encoded (%40, %2F)"},
		{"host=h user=u password=s3cret dbname=db", "write it as postgres://"},
	} {
		_, err := parseDSN(c.dsn)
		if err == nil {
			t.Errorf("parseDSN(%q) succeeded; want it refused", c.dsn)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("parseDSN(%q): %v\nwant it to say %q", c.dsn, err, c.says)
		}
		if strings.Contains(err.Error(), "s3c") {
			t.Errorf("parseDSN(%q): %v\nshows the password", c.dsn, err)
		}
	}
}

// oddPasswords are passwords with the characters DSNs use as separators.
var oddPasswords = []string{"s3cret", "p@ss", "p:ss", "pa/ss", "a@b:c/d", "@:/", "p?ss#1", "p ss", "p'ss", "p%ss"}

// percentEncoded is pw with every byte but letters and digits percent-encoded.
func percentEncoded(pw string) string {
	var b strings.Builder
	for i := 0; i < len(pw); i++ {
		if c := pw[i]; ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// TestRedact shows every scheme's DSN with odd passwords, raw and percent-encoded: the shown
// form keeps all but the password, the secrets hide the password in every spelling, and where
// the DSN is valid its driver reads the password redact hid.
func TestRedact(t *testing.T) {
	pgPassword := func(dsn string) (string, error) {
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			return "", err
		}
		return cfg.Password, nil
	}
	myPassword := func(dsn string) (string, error) {
		_, native, _ := strings.Cut(dsn, "://")
		cfg, err := mysql.ParseDSN(native)
		if err != nil {
			return "", err
		}
		return cfg.Passwd, nil
	}
	for _, sh := range []struct {
		name   string
		encode bool // the DSN carries the password percent-encoded
		dsn    func(pw string) string
		shown  string
		driver func(dsn string) (string, error) // the password the driver reads, for a valid DSN
	}{
		{"postgres, encoded", true, func(pw string) string { return "postgres://app:" + pw + "@db.example:5432/orders?sslmode=disable" },
			"postgres://app:xxxxx@db.example:5432/orders?sslmode=disable", pgPassword},
		{"postgresql, raw (invalid)", false, func(pw string) string { return "postgresql://app:" + pw + "@db.example/orders" },
			"postgresql://app:xxxxx@db.example/orders", nil},
		{"postgres, query", true, func(pw string) string { return "postgres://app@db.example/orders?sslmode=disable&password=" + pw },
			"postgres://app@db.example/orders?sslmode=disable&password=xxxxx", pgPassword},
		{"postgres, sslpassword", true, func(pw string) string { return "postgres://app@h/orders?sslpassword=" + pw + "&sslmode=require" },
			"postgres://app@h/orders?sslpassword=xxxxx&sslmode=require", nil},
		{"mysql", false, func(pw string) string { return "mysql://app:" + pw + "@tcp(db.example:3306)/orders?timeout=1s" },
			"mysql://app:xxxxx@tcp(db.example:3306)/orders?timeout=1s", myPassword},
		{"mariadb, socket", false, func(pw string) string { return "mariadb://app:" + pw + "@unix(/run/mysqld/mysqld.sock)/orders" },
			"mariadb://app:xxxxx@unix(/run/mysqld/mysqld.sock)/orders", myPassword},
		{"mysql native, no scheme", false, func(pw string) string { return "app:" + pw + "@tcp(db.example:3306)/orders" },
			"app:xxxxx@tcp(db.example:3306)/orders", nil},
		{"unknown scheme", false, func(pw string) string { return "pg://app:" + pw + "@db.example/orders" },
			"pg://app:xxxxx@db.example/orders", nil},
		{"key/value, quoted", false, func(pw string) string {
			return "host=h user=app password='" + strings.ReplaceAll(pw, "'", `\'`) + "' dbname=orders"
		}, "host=h user=app password=xxxxx dbname=orders", nil},
	} {
		for _, pw := range oddPasswords {
			written := pw
			if sh.encode {
				written = percentEncoded(pw)
			}
			dsn := sh.dsn(written)
			shown, secrets := redact(dsn)
			if shown != sh.shown {
				t.Errorf("%s, password %q: redact(%q) shows %q; want %q", sh.name, pw, dsn, shown, sh.shown)
			}
			var out bytes.Buffer
			s := &scrubber{w: &out}
			s.hide(secrets...)
			fmt.Fprintf(s, "failed: %s (password %s, written %s)", dsn, pw, written)
			if strings.Contains(out.String(), pw) || strings.Contains(out.String(), written) {
				t.Errorf("%s, password %q: the secrets %q leave it in %q", sh.name, pw, secrets, out.String())
			}
			if sh.driver != nil {
				if got, err := sh.driver(dsn); err != nil || got != pw {
					t.Errorf("%s: the driver reads password %q from %q (%v); want %q", sh.name, got, dsn, err, pw)
				}
			}
		}
	}
}

// TestParseDSNHidesOddPasswordsInErrors checks that a DSN refused, or one whose password the
// Postgres URL form cannot carry raw, shows no part of its password.
func TestParseDSNHidesOddPasswordsInErrors(t *testing.T) {
	for _, pw := range oddPasswords {
		for _, dsn := range []string{
			"postgres://app:" + pw + "@db.example/orders",
			"pg://app:" + pw + "@db.example/orders",
			"mysql://app:" + pw + "@db.example:3306/orders",
			"mysql:app:" + pw + "@tcp(db.example:3306)/orders",
			"app:" + pw + "@tcp(db.example:3306)/orders",
		} {
			tg, err := parseDSN(dsn)
			text := tg.shown
			if err != nil {
				text = err.Error()
			}
			if strings.Contains(text, pw) {
				t.Errorf("parseDSN(%q) shows the password: %q", dsn, text)
			}
		}
	}
}

func TestScrubberHidesEverySecretItWasGiven(t *testing.T) {
	var out bytes.Buffer
	s := &scrubber{w: &out}
	s.Write([]byte("before: hunter2\n"))
	s.hide("hunter2", "")
	s.hide("hunter")
	s.Write([]byte("after: hunter2 and hunter\n"))
	if got, want := out.String(), "before: hunter2\nafter: xxxxx and xxxxx\n"; got != want {
		t.Errorf("scrubbed %q; want %q", got, want)
	}
}
