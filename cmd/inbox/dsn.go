package main

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlinbox/inbox/dialect"
)

// dsnHelp is how a DSN names its database, for every command that takes one.
const dsnHelp = `A DSN names the database by its scheme:
  postgres://user:password@host:5432/db?sslmode=disable   (or postgresql://)
      Postgres, through pgx; percent-encode @, / and % in the password
  mysql://user:password@tcp(host:3306)/db?param=value
      MySQL: after the scheme comes go-sql-driver/mysql's own DSN, as it is (@ : / may stay raw in
      the password)
  mariadb://user:password@tcp(host:3306)/db?param=value
      MariaDB: the same
  sqlite://path/to/app.db   or   file:path/to/app.db?_pragma=...
      SQLite, through glebarez/go-sqlite, in WAL mode with a busy timeout
  path/to/app.db
      SQLite, a bare file path
The password never shows in the output: it prints as xxxxx.
`

// schemesAccepted names the schemes in the errors that refuse one.
const schemesAccepted = "postgres://, postgresql://, mysql://, mariadb://, sqlite:// or file:, or a bare SQLite file path"

// A target is the database a DSN names: the database/sql driver and the text it opens (for
// SQLite, the file and the DSN's query, from which source builds the text), the dialect, and
// the DSN as it may be shown, with its password replaced by xxxxx.
type target struct {
	driver  string
	source  string
	file    string     // SQLite: the database file's path, as the operating system names it
	query   url.Values // SQLite: the DSN's query parameters, as written
	dialect dialect.Runtime
	shown   string
	fromEnv bool // the DSN came from $INBOX_DSN
	// secrets are the DSN's passwords as they may appear in any text (as written, and decoded),
	// for the output streams to hide.
	secrets []string
}

// An access is what a command does to a SQLite database file. The servers' databases are
// opened alike whatever the command does.
type access int

const (
	// readFile: the command only reads. The file must exist, and is opened read-only (mode=ro),
	// in the journal mode it has.
	readFile access = iota
	// writeFile: the command changes rows. The file must exist (mode=rw).
	writeFile
	// createFile: the command creates tables, and the file if it does not exist, in a directory
	// that must.
	createFile
)

var (
	// urlScheme matches what looks like a scheme: a word and a colon, as in "pg://" or
	// "postgress:". A single letter is a Windows drive, not a scheme.
	urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]+):`)
	// keywordDSN matches a key/value DSN such as Postgres's "host=… user=…".
	keywordDSN = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)
)

// parseDSN turns a DSN into its target, by its scheme. A DSN of another scheme, or one that does
// not parse, is refused with an error that shows it redacted.
func parseDSN(dsn string) (target, error) {
	shown, secrets := redact(dsn)
	t := target{shown: shown, secrets: secrets}
	fail := func(format string, args ...any) (target, error) {
		return t, fmt.Errorf("DSN %s: "+format, append([]any{shown}, args...)...)
	}
	scheme, rest := "", dsn
	if m := urlScheme.FindStringSubmatch(dsn); m != nil {
		scheme, rest = strings.ToLower(m[1]), dsn[len(m[0]):]
	}
	slashes := strings.HasPrefix(rest, "//")
	name := ""
	switch {
	case dsn == "":
		return fail("empty: name a database with %s", schemesAccepted)
	case scheme == "postgres" || scheme == "postgresql":
		if err := t.postgres(scheme, rest, dsn); err != nil {
			return fail("%v", err)
		}
		name = "postgres"
	case scheme == "mysql" || scheme == "mariadb":
		if err := t.mysql(scheme, rest); err != nil {
			return fail("%v", err)
		}
		name = scheme
	case scheme == "sqlite" || scheme == "file":
		path := rest
		if scheme == "sqlite" {
			if !slashes {
				return fail("write sqlite://path or file:path")
			}
			path = rest[2:]
		}
		if err := t.sqlite(path, scheme == "sqlite"); err != nil {
			return fail("%v", err)
		}
		name = "sqlite"
	case scheme != "":
		return fail("unknown scheme %s: use %s (a file path with a colon goes as sqlite://path)", scheme, schemesAccepted)
	case keywordDSN.MatchString(dsn):
		return fail("a key/value DSN is not taken: write it as postgres://user:password@host:5432/db")
	default:
		if err := t.sqlite(dsn, true); err != nil {
			return fail("%v", err)
		}
		name = "sqlite"
	}
	d, err := dialect.Parse(name, "")
	if err != nil {
		return fail("%v", err)
	}
	t.dialect = d
	return t, nil
}

// postgres sets t to the Postgres database of dsn, whose scheme and what follows it are given.
func (t *target) postgres(scheme, rest, dsn string) error {
	if !strings.HasPrefix(rest, "//") {
		return fmt.Errorf("write %s://…", scheme)
	}
	// pgx, as libpq, ends the user information at the first @ before the first /.
	authority, path, _ := strings.Cut(rest[2:], "/")
	path, _, _ = strings.Cut(path, "?")
	if _, host, _ := strings.Cut(authority, "@"); strings.Contains(host, "@") || strings.Contains(path, "@") {
		return errors.New("an @ or a / in the user name or the password must be percent-encoded (%40, %2F)")
	}
	t.driver, t.source = "pgx", dsn
	return nil
}

// mysql sets t to the MySQL or MariaDB database of go-sql-driver/mysql's DSN after scheme://.
func (t *target) mysql(scheme, rest string) error {
	if !strings.HasPrefix(rest, "//") {
		return fmt.Errorf("write %s://…", scheme)
	}
	native := rest[2:]
	cfg, err := mysql.ParseDSN(native)
	if err == nil && cfg.Net != "tcp" && cfg.Net != "unix" {
		err = fmt.Errorf("network %q", cfg.Net)
	}
	if err != nil {
		return fmt.Errorf("%v: after %s:// comes go-sql-driver/mysql's DSN, user:password@tcp(host:3306)/dbname?param=value", err, scheme)
	}
	t.driver, t.source = "mysql", native
	return nil
}

// sqlitePragmas are the pragmas a SQLite database opens with, unless its DSN sets them: WAL, so
// that readers do not block the writer, and a busy timeout, so that writers wait for the lock
// rather than fail at once. A read-only connection takes the busy timeout alone: it cannot
// change the journal mode, and has nothing to sync.
var sqlitePragmas = []struct {
	name, value string
	readOnly    bool
}{
	{"journal_mode", "WAL", false},
	{"busy_timeout", "10000", true},
	{"synchronous", "NORMAL", false},
}

// sqlite sets t to the SQLite file of a path with optional query parameters (path?_pragma=…).
// A path given bare or as sqlite://path is made absolute, so that the output says where the
// file is; a file: DSN is a SQLite URI, whose path is shown as it is written and read with its
// %XX escapes decoded, as SQLite reads it.
func (t *target) sqlite(pathQuery string, bare bool) error {
	path, query, _ := strings.Cut(pathQuery, "?")
	if path == "" {
		return errors.New("no file path")
	}
	params, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("the query parameters: %v", err)
	}
	t.driver, t.query, t.shown, t.file = "sqlite", params, path, path
	if bare {
		if t.file, err = filepath.Abs(path); err != nil {
			return err
		}
		t.shown = t.file
	} else if decoded, err := url.PathUnescape(path); err == nil {
		t.file = decoded
	}
	t.source = t.sourceFor(createFile)
	return nil
}

// uriPath escapes what a SQLite URI's path cannot carry raw.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// sourceFor is the text the driver opens t with for a command of access a: for a server, its
// DSN; for SQLite, a glebarez/go-sqlite URI with the pragmas the DSN does not set, and the mode
// that the access needs (it replaces the DSN's own).
func (t target) sourceFor(a access) string {
	if t.driver != "sqlite" {
		return t.source
	}
	params := url.Values{}
	for k, v := range t.query {
		params[k] = append([]string(nil), v...)
	}
	for _, p := range sqlitePragmas {
		if a == readFile && !p.readOnly {
			continue
		}
		set := false
		for _, v := range params["_pragma"] {
			set = set || strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), p.name)
		}
		if !set {
			params.Add("_pragma", p.name+"("+p.value+")")
		}
	}
	switch a {
	case readFile:
		params.Set("mode", "ro")
	case writeFile:
		params.Set("mode", "rw")
	}
	return "file:" + uriPath.Replace(t.file) + "?" + params.Encode()
}

// hidden is what a password shows as.
const hidden = "xxxxx"

// pair matches a key=value pair of a URL's query or of a key/value DSN; a value runs to the next
// & or space, or is quoted.
var pair = regexp.MustCompile(`(^|[?&\s])([^=&\s?]+)=('(?:[^'\\]|\\.)*'|[^&\s]*)`)

// isPasswordKey reports whether key, percent-decoded, names a password: password, sslpassword
// (Postgres's for the client key), passwd or pwd.
func isPasswordKey(key string) bool {
	if d, err := url.QueryUnescape(key); err == nil {
		key = d
	}
	switch strings.ToLower(key) {
	case "password", "sslpassword", "passwd", "pwd":
		return true
	}
	return false
}

// redactPairs hides the values of the password pairs in s, and returns them.
func redactPairs(s string) (shown string, values []string) {
	shown = pair.ReplaceAllStringFunc(s, func(m string) string {
		sub := pair.FindStringSubmatch(m)
		if !isPasswordKey(sub[2]) {
			return m
		}
		if v := sub[3]; strings.HasPrefix(v, "'") {
			v = strings.Trim(v, "'")
			values = append(values, v, strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(v))
		} else if v != "" {
			values = append(values, v)
		}
		return sub[1] + sub[2] + "=" + hidden
	})
	return shown, values
}

// redact returns dsn with every password replaced by xxxxx, and the passwords as they may appear
// in other text. It errs towards hiding too much, so that a DSN mistyped or of an unknown
// scheme hides its password too: the user information runs from after "scheme://" (or from the
// start) to the last @ (for the MySQL family, the last @ before the last /, as the driver reads
// it), and its password from the first colon; so a password with @, : or / in it is hidden whole.
func redact(dsn string) (shown string, secrets []string) {
	shown = dsn
	head, rest := "", dsn
	if m := urlScheme.FindString(dsn); m != "" && strings.HasPrefix(dsn[len(m):], "//") {
		head, rest = dsn[:len(m)+2], dsn[len(m)+2:]
	}
	end := len(rest)
	if s := strings.ToLower(head); s == "mysql://" || s == "mariadb://" {
		if slash := strings.LastIndexByte(rest, '/'); slash >= 0 {
			end = slash
		}
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		if user, password, ok := strings.Cut(rest[:at], ":"); ok && password != "" {
			secrets = append(secrets, password)
			shown = head + user + ":" + hidden + rest[at:]
		}
	}
	shown, values := redactPairs(shown)
	return shown, withDecoded(append(secrets, values...))
}

// withDecoded adds each secret's percent-decoded forms.
func withDecoded(secrets []string) []string {
	all := secrets
	for _, s := range secrets {
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			all = append(all, d)
		}
		if d, err := url.PathUnescape(s); err == nil && d != s {
			all = append(all, d)
		}
	}
	return all
}
