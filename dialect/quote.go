package dialect

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// quote quotes ident for the database c describes: inside c.Quote, inner
// quotes doubled. A name longer than the database keeps (c.MaxNameBytes, c.MaxNameChars) is
// refused rather than silently truncated by the server.
func quote(c *Caps, ident string) (string, error) {
	switch {
	case ident == "":
		return "", sentinel.Errorf(nil, "", "empty identifier: name the table or column")
	case strings.IndexByte(ident, 0) >= 0:
		return "", sentinel.Errorf(nil, "", "identifier %q holds a NUL byte: no database accepts it in a name", ident)
	case !utf8.ValidString(ident):
		return "", sentinel.Errorf(nil, "", "identifier %q is not valid UTF-8", ident)
	case c.MaxNameBytes > 0 && len(ident) > c.MaxNameBytes:
		return "", sentinel.Errorf(nil, "", "identifier %q is %d bytes; %s keeps %d: shorten the name", ident, len(ident), c.Title, c.MaxNameBytes)
	}
	if n := utf8.RuneCountInString(ident); c.MaxNameChars > 0 && n > c.MaxNameChars {
		return "", sentinel.Errorf(nil, "", "identifier %q is %d characters; %s keeps %d: shorten the name", ident, n, c.Title, c.MaxNameChars)
	}
	q := string(c.Quote)
	return q + strings.ReplaceAll(ident, q, q+q) + q, nil
}

// Literal writes s as a string literal of the database c describes, which the server reads
// back as s whatever the session's settings (c.Strings): no s, whatever quotes and
// backslashes it holds, ends the literal early. A NUL byte, which Postgres's text cannot hold,
// stays as it is on Postgres and SQLite, where it ends the statement's text inside the literal,
// so the statement fails to prepare.
func (c *Caps) Literal(s string) string {
	switch {
	case c.Strings == EscapeStrings && strings.Contains(s, `\`):
		return "E'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
	case c.Strings == HexStrings && strings.ContainsAny(s, "\\\x00"):
		return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
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

// scannedLayouts are the texts a driver may hand a timestamp back as: MySQL's and MariaDB's
// DATETIME without the driver's parseTime, SQLite's text (SQLiteTimeLayout), and a server
// clock's reading (Caps.ClockQuery).
var scannedLayouts = []string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano}

// ScannedTime reads a timestamp as a driver scanned it into an any: a time.Time, or its text,
// taken as UTC.
func ScannedTime(v any) (time.Time, error) {
	var text string
	switch v := v.(type) {
	case time.Time:
		return v.UTC(), nil
	case []byte:
		text = string(v)
	case string:
		text = v
	default:
		return time.Time{}, fmt.Errorf("a timestamp read as %T, not a time", v)
	}
	for _, layout := range scannedLayouts {
		if t, err := time.ParseInLocation(layout, text, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a timestamp in the library's layout", text)
}
