package dialect_test

import (
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

var quoters = []struct {
	d     dialect.Dialect
	quote string
	limit func(string) bool // whether the database keeps the whole name
}{
	{dialect.Postgres[isolation.Default]{}, `"`, func(s string) bool { return len(s) <= 63 }},
	{dialect.MySQL[isolation.Default]{}, "`", func(s string) bool { return utf8.RuneCountInString(s) <= 64 }},
	{dialect.MariaDB[isolation.Default]{}, "`", func(s string) bool { return utf8.RuneCountInString(s) <= 64 }},
	{dialect.SQLite[isolation.Default]{}, "`", func(string) bool { return true }},
}

func TestQuote(t *testing.T) {
	tests := []struct {
		ident string
		want  map[string]string // by dialect name; "" means refused
	}{
		{"jobs", map[string]string{"postgres": `"jobs"`, "mysql": "`jobs`", "mariadb": "`jobs`", "sqlite": "`jobs`"}},
		{"Jobs Table", map[string]string{"postgres": `"Jobs Table"`, "mysql": "`Jobs Table`", "mariadb": "`Jobs Table`", "sqlite": "`Jobs Table`"}},
		{`a"b`, map[string]string{"postgres": `"a""b"`, "mysql": "`a\"b`", "mariadb": "`a\"b`", "sqlite": "`a\"b`"}},
		{"a`b", map[string]string{"postgres": "\"a`b\"", "mysql": "`a``b`", "mariadb": "`a``b`", "sqlite": "`a``b`"}},
		{"``", map[string]string{"postgres": "\"``\"", "mysql": "``````", "mariadb": "``````", "sqlite": "``````"}},
		{"", map[string]string{}},
		{"jo\x00bs", map[string]string{}},
		{"\xff", map[string]string{}},
		{strings.Repeat("a", 63), map[string]string{
			"postgres": `"` + strings.Repeat("a", 63) + `"`, "mysql": "`" + strings.Repeat("a", 63) + "`",
			"mariadb": "`" + strings.Repeat("a", 63) + "`", "sqlite": "`" + strings.Repeat("a", 63) + "`"}},
		// 64 bytes: too long for Postgres only.
		{strings.Repeat("a", 64), map[string]string{
			"mysql": "`" + strings.Repeat("a", 64) + "`", "mariadb": "`" + strings.Repeat("a", 64) + "`",
			"sqlite": "`" + strings.Repeat("a", 64) + "`"}},
		// 64 characters in 128 bytes: MySQL and MariaDB count characters.
		{strings.Repeat("é", 64), map[string]string{
			"mysql": "`" + strings.Repeat("é", 64) + "`", "mariadb": "`" + strings.Repeat("é", 64) + "`",
			"sqlite": "`" + strings.Repeat("é", 64) + "`"}},
		// 63 bytes, 64 once its quote is doubled: the limit is on the name, not on its quoting.
		{strings.Repeat("a", 62) + `"`, map[string]string{
			"postgres": `"` + strings.Repeat("a", 62) + `"""`, "mysql": "`" + strings.Repeat("a", 62) + "\"`",
			"mariadb": "`" + strings.Repeat("a", 62) + "\"`", "sqlite": "`" + strings.Repeat("a", 62) + "\"`"}},
		{strings.Repeat("é", 65), map[string]string{"sqlite": "`" + strings.Repeat("é", 65) + "`"}},
		// 64 characters once the inner backtick is counted once, not twice.
		{strings.Repeat("a", 63) + "`", map[string]string{
			"mysql": "`" + strings.Repeat("a", 63) + "```", "mariadb": "`" + strings.Repeat("a", 63) + "```",
			"sqlite": "`" + strings.Repeat("a", 63) + "```"}},
	}
	for _, tt := range tests {
		for _, q := range quoters {
			name := q.d.Name()
			got, err := q.d.Quote(tt.ident)
			want, accepted := tt.want[name]
			switch {
			case accepted && err != nil:
				t.Errorf("%s: Quote(%q): %v, want %s", name, tt.ident, err, want)
			case accepted && got != want:
				t.Errorf("%s: Quote(%q) = %s, want %s", name, tt.ident, got, want)
			case !accepted && err == nil:
				t.Errorf("%s: Quote(%q) = %s, want it refused", name, tt.ident, got)
			}
		}
	}
}

func TestQuoteNamesTheLimit(t *testing.T) {
	_, err := dialect.Postgres[isolation.Default]{}.Quote(strings.Repeat("a", 64))
	if err == nil || !strings.Contains(err.Error(), "63") {
		t.Errorf("Postgres, 64 bytes: %v, want an error naming the 63-byte limit", err)
	}
	_, err = dialect.MySQL[isolation.Default]{}.Quote(strings.Repeat("é", 65))
	if err == nil || !strings.Contains(err.Error(), "64") {
		t.Errorf("MySQL, 65 characters: %v, want an error naming the 64-character limit", err)
	}
}

// FuzzQuote checks that no name escapes its quotes: whatever Quote accepts comes back inside
// one pair of quote characters, with every inner quote doubled and nothing else changed; and
// Quote refuses only the names the databases would not keep.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"jobs", `a"b`, "a`b", "``", `""`, "", "\x00", "\xff", "é", strings.Repeat("é", 64), strings.Repeat("a", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ident string) {
		for _, q := range quoters {
			got, err := q.d.Quote(ident)
			keeps := ident != "" && !strings.Contains(ident, "\x00") && utf8.ValidString(ident) && q.limit(ident)
			if err != nil {
				if keeps {
					t.Errorf("%s: Quote(%q) refused a name the database keeps: %v", q.d.Name(), ident, err)
				}
				continue
			}
			if !keeps {
				t.Errorf("%s: Quote(%q) = %s, want it refused", q.d.Name(), ident, got)
			}
			if len(got) < 2 || !strings.HasPrefix(got, q.quote) || !strings.HasSuffix(got, q.quote) {
				t.Fatalf("%s: Quote(%q) = %s, not inside %s quotes", q.d.Name(), ident, got, q.quote)
			}
			inner := got[1 : len(got)-1]
			if undone := strings.ReplaceAll(inner, q.quote+q.quote, q.quote); undone != ident {
				t.Errorf("%s: Quote(%q) = %s, which reads back as %q", q.d.Name(), ident, got, undone)
			}
			for i := 0; i < len(inner); i++ {
				if inner[i] != q.quote[0] {
					continue
				}
				if i+1 == len(inner) || inner[i+1] != q.quote[0] {
					t.Fatalf("%s: Quote(%q) = %s, with an unpaired quote at byte %d: the name escapes", q.d.Name(), ident, got, i+1)
				}
				i++
			}
		}
	})
}

func TestLiteral(t *testing.T) {
	tests := []struct {
		s    string
		want map[string]string // by dialect name
	}{
		{"kind_0", map[string]string{"postgres": `'kind_0'`, "mysql": `'kind_0'`, "mariadb": `'kind_0'`, "sqlite": `'kind_0'`}},
		{"", map[string]string{"postgres": `''`, "mysql": `''`, "mariadb": `''`, "sqlite": `''`}},
		{"it's", map[string]string{"postgres": `'it''s'`, "mysql": `'it''s'`, "mariadb": `'it''s'`, "sqlite": `'it''s'`}},
		{`a\b`, map[string]string{"postgres": `E'a\\b'`, "mysql": `_utf8mb4 X'615c62'`, "mariadb": `_utf8mb4 X'615c62'`, "sqlite": `'a\b'`}},
		// The quote a backslash would escape on MySQL in its default mode, and on Postgres with
		// standard_conforming_strings off, were it written '…'.
		{`x\' OR 1=1 --`, map[string]string{"postgres": `E'x\\'' OR 1=1 --'`, "mysql": `_utf8mb4 X'785c27204f5220313d31202d2d'`,
			"mariadb": `_utf8mb4 X'785c27204f5220313d31202d2d'`, "sqlite": `'x\'' OR 1=1 --'`}},
		{"é", map[string]string{"postgres": `'é'`, "mysql": `'é'`, "mariadb": `'é'`, "sqlite": `'é'`}},
	}
	for _, tt := range tests {
		for _, q := range quoters {
			if got, want := q.d.Caps().Literal(tt.s), tt.want[q.d.Name()]; got != want {
				t.Errorf("%s: Literal(%q) = %s, want %s", q.d.Name(), tt.s, got, want)
			}
		}
	}
}

// FuzzLiteral checks that no string escapes its literal: read by each database's rules, in
// each of its modes that spell literals differently, the literal Literal writes is one token,
// the whole of its text, that reads back as the string. A NUL byte, where the literal keeps it
// (Postgres, SQLite), ends the statement's text there: what is left is a literal never closed.
func FuzzLiteral(f *testing.F) {
	for _, s := range []string{"kind_0", "", "'", `\`, `\'`, `''`, `\\'`, "a\x00b", "é", `x\' OR 1=1 --`, "' OR '1'='1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, q := range quoters {
			lit := q.d.Caps().Literal(s)
			for _, backslashes := range readModes(q.d) {
				text := lit
				if i := strings.IndexByte(text, 0); i >= 0 && !strings.HasPrefix(text, "_utf8mb4 X'") {
					text = text[:i] // where the server's statement text ends
				}
				got, n, closed := readLiteral(text, backslashes)
				switch {
				case strings.Contains(s, "\x00") && text != lit:
					if closed {
						t.Errorf("%s (backslash escapes %t): Literal(%q) = %s: cut at its NUL byte it is a closed literal, %q", q.d.Name(), backslashes, s, lit, text[:n])
					}
				case !closed || n != len(text):
					t.Fatalf("%s (backslash escapes %t): Literal(%q) = %s: the literal ends after %d of %d bytes: the string escapes", q.d.Name(), backslashes, s, lit, n, len(text))
				case got != s:
					t.Errorf("%s (backslash escapes %t): Literal(%q) = %s, which reads back as %q", q.d.Name(), backslashes, s, lit, got)
				}
			}
		}
	})
}

// readModes are whether a backslash escapes in '…', for each mode of d's server that reads it
// differently: Postgres by standard_conforming_strings (its E'…' reads it as an escape always),
// MySQL and MariaDB by their sql_mode (NO_BACKSLASH_ESCAPES); SQLite never.
func readModes(d dialect.Dialect) []bool {
	if d.Caps().Strings == dialect.StandardStrings {
		return []bool{false}
	}
	return []bool{true, false}
}

// readLiteral reads one string literal at the start of text, as a server whose '…' reads a
// backslash as an escape where backslashes says so (E'…' always does): its value, the bytes it
// took, and whether it was closed.
func readLiteral(text string, backslashes bool) (string, int, bool) {
	if rest, ok := strings.CutPrefix(text, "_utf8mb4 X'"); ok {
		end := strings.IndexByte(rest, '\'')
		if end < 0 {
			return "", len(text), false
		}
		b, err := hex.DecodeString(rest[:end])
		if err != nil {
			return "", len(text), false
		}
		return string(b), len(text) - len(rest) + end + 1, true
	}
	i := 0
	if strings.HasPrefix(text, "E'") {
		i, backslashes = 1, true
	}
	if i >= len(text) || text[i] != '\'' {
		return "", 0, false
	}
	var b strings.Builder
	for i++; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\\' && backslashes:
			if i+1 == len(text) {
				return "", len(text), false
			}
			i++
			b.WriteByte(text[i])
		case c == '\'' && i+1 < len(text) && text[i+1] == '\'':
			i++
			b.WriteByte('\'')
		case c == '\'':
			return b.String(), i + 1, true
		default:
			b.WriteByte(c)
		}
	}
	return "", len(text), false
}
