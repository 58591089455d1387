package dialect_test

import (
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
