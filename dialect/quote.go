package dialect

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// quote quotes ident for the named database: double quotes on Postgres, backticks elsewhere,
// inner quotes doubled. Postgres keeps 63 bytes of a name and MySQL and MariaDB 64 characters;
// a longer name is refused rather than silently truncated by the server.
func quote(db, ident string) (string, error) {
	switch {
	case ident == "":
		return "", fmt.Errorf("inbox: empty identifier: name the table or column")
	case strings.IndexByte(ident, 0) >= 0:
		return "", fmt.Errorf("inbox: identifier %q holds a NUL byte: no database accepts it in a name", ident)
	case !utf8.ValidString(ident):
		return "", fmt.Errorf("inbox: identifier %q is not valid UTF-8", ident)
	}
	q := "`"
	switch db {
	case "postgres":
		if len(ident) > 63 {
			return "", fmt.Errorf("inbox: identifier %q is %d bytes; Postgres keeps 63: shorten the name", ident, len(ident))
		}
		q = `"`
	case "mysql", "mariadb":
		if n := utf8.RuneCountInString(ident); n > 64 {
			return "", fmt.Errorf("inbox: identifier %q is %d characters; %s keeps 64: shorten the name", ident, n, db)
		}
	}
	return q + strings.ReplaceAll(ident, q, q+q) + q, nil
}

func dollar(n int) string { return "$" + strconv.Itoa(n) }

// serverTime is how a timestamp is bound on Postgres, MySQL and MariaDB: UTC, to the
// microsecond those servers keep, so a value written and later compared for equality (a lease
// token) matches.
func serverTime(t time.Time) any { return t.UTC().Truncate(time.Microsecond) }

// SQLiteTimeLayout is the text a timestamp is stored as on SQLite: UTC, fixed width, so that
// comparing two values as text compares them as times.
const SQLiteTimeLayout = "2006-01-02 15:04:05.000000"

func sqliteTime(t time.Time) any { return t.UTC().Format(SQLiteTimeLayout) }
