// Package sqlshape splits a statement into its shape and what it quotes: the forms count a
// statement's parameters by it, and the fuzz tests prove by it that no table name, column name
// or key text escapes its quotes.
package sqlshape

import "fmt"

// Split returns sql with every quoted identifier replaced by <id> and every string literal by
// <lit>, with the contents of each in order, inner quotes undoubled. identQuote is the
// identifier quote of the dialect ('"' on Postgres, '`' elsewhere). It fails on a quote that is
// not closed.
func Split(sql string, identQuote byte) (shape string, idents, literals []string, err error) {
	var out []byte
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if c != identQuote && c != '\'' {
			out = append(out, c)
			continue
		}
		var content []byte
		closed := false
		for i++; i < len(sql); i++ {
			if sql[i] != c {
				content = append(content, sql[i])
				continue
			}
			if i+1 < len(sql) && sql[i+1] == c {
				content = append(content, c)
				i++
				continue
			}
			closed = true
			break
		}
		if !closed {
			return "", nil, nil, fmt.Errorf("a %c quote is not closed in %s", c, sql)
		}
		if c == identQuote {
			out = append(out, "<id>"...)
			idents = append(idents, string(content))
		} else {
			out = append(out, "<lit>"...)
			literals = append(literals, string(content))
		}
	}
	return string(out), idents, literals, nil
}
