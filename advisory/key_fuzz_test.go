package advisory

import (
	"slices"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqlshape"
	"github.com/sqlinbox/inbox/isolation"
)

// FuzzKeyTemplate: a template parseKey accepts renders (internal/sqltext's key expression) to
// SQL whose only quoted pieces are the template's columns (as identifiers) and its text (as
// literals), in order, and whose shape outside them is a key's: no text or name escapes its
// quotes.
func FuzzKeyTemplate(f *testing.F) {
	for _, s := range []string{"jobs-{id}", "{account}", "a:{x}/{y}.", "{a}{b}", "x{`y`}", `{"q"}`, "{}", "{a", "a}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		for _, d := range []dialect.Dialect{dialect.Postgres[isolation.Default]{}, dialect.MySQL[isolation.Default]{}} {
			parts, err := parseKey(d, "jobs", tmpl)
			if err != nil || len(parts) == 0 {
				return // refused, or empty: New puts the default in its place
			}
			c := d.Caps()
			shape, idents, literals, err := sqlshape.Split(keyExpr(t, d, parts), c.Quote)
			if err != nil {
				t.Fatalf("%s, template %q: %v", d.Name(), tmpl, err)
			}
			var rebuilt strings.Builder
			var wantIdents, wantLiterals, pieces []string
			for _, p := range parts {
				if p.Column == "" {
					rebuilt.WriteString(p.Text)
					wantLiterals = append(wantLiterals, p.Text)
					pieces = append(pieces, "<lit>")
					continue
				}
				_, name, _, _ := sqlshape.Split(p.Column, c.Quote)
				rebuilt.WriteString("{" + name[0] + "}")
				wantIdents = append(wantIdents, name[0])
				wantLiterals = append(wantLiterals, "")
				pieces = append(pieces, "COALESCE(CAST(<id> AS "+c.TextType+"), <lit>)")
			}
			if rebuilt.String() != tmpl {
				t.Fatalf("template %q parsed into parts that rebuild %q", tmpl, rebuilt.String())
			}
			wantShape := "CONCAT(" + strings.Join(pieces, ", ") + ")"
			if c.ConcatOperator {
				wantShape = strings.Join(pieces, " || ")
			}
			if shape != wantShape || !slices.Equal(idents, wantIdents) || !slices.Equal(literals, wantLiterals) {
				t.Fatalf("%s, template %q: SQL shape %q with identifiers %q and literals %q; want %q, %q, %q",
					d.Name(), tmpl, shape, idents, literals, wantShape, wantIdents, wantLiterals)
			}
		}
	})
}
