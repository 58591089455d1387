package advisory

import (
	"fmt"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// parseKey splits a template such as "jobs-{id}" into its text and its columns, each column
// quoted for d, as internal/sqltext renders a key. It refuses unbalanced or empty braces, text
// the SQL literal could not carry as it is, and a column name the database would not keep,
// each with an error wrapping inbox.ErrSchema: the template is the description's, and no
// second try mends it.
func parseKey(d dialect.Dialect, table, tmpl string) ([]sqltext.KeyPart, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: table %q: advisory key template %q: "+format, append([]any{inbox.ErrSchema, table, tmpl}, args...)...)
	}
	var parts []sqltext.KeyPart
	rest := tmpl
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			parts = append(parts, sqltext.KeyPart{Text: rest})
			break
		}
		if rest[open] == '}' {
			return nil, bad("'}' at byte %d closes no '{': write columns as {column}", len(tmpl)-len(rest)+open)
		}
		if open > 0 {
			parts = append(parts, sqltext.KeyPart{Text: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return nil, bad("'{' at byte %d is not closed by '}': write columns as {column}", len(tmpl)-len(rest)+open)
		}
		name := rest[open+1 : open+1+end]
		if name == "" {
			return nil, bad("empty braces at byte %d: name a column inside them, as in {id}", len(tmpl)-len(rest)+open)
		}
		q, err := d.Quote(name)
		if err != nil {
			return nil, sentinel.Errorf(inbox.ErrSchema, sentinel.Table(table), "advisory key template %q, column %q: %v", tmpl, name, err)
		}
		parts = append(parts, sqltext.KeyPart{Column: q})
		rest = rest[open+1+end+1:]
	}
	for _, p := range parts {
		if strings.ContainsAny(p.Text, "'\\\x00") {
			return nil, bad("its text holds a quote, a backslash or a NUL byte, which a SQL literal would need escaped differently by server and mode: leave them out of the key")
		}
	}
	return parts, nil
}
