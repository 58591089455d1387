package admin

import (
	"fmt"
	"strconv"
	"strings"
)

// pathStep is one step of a JSON path: a key, or an array index where index is set.
type pathStep struct {
	key   string
	index int
	isIdx bool
}

type jsonPath []pathStep

// parsePath reads a path as Filter.Path is written: keys apart by dots, each followed by any
// array indexes in brackets (customer.id, items[0].sku), with or without a leading "$.". A key
// holds neither a quote nor a backslash, which the databases' path syntaxes escape
// differently.
func parsePath(s string) (jsonPath, error) {
	text := strings.TrimPrefix(strings.TrimPrefix(s, "$"), ".")
	var out jsonPath
	for part := range strings.SplitSeq(text, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			if strings.ContainsAny(key, "\"\\]") {
				return nil, fmt.Errorf("JSON path %q: key %q holds a quote, a backslash or a bracket: write keys of plain characters", s, key)
			}
			out = append(out, pathStep{key: key})
		} else if rest == "" || part == "" {
			return nil, fmt.Errorf("JSON path %q has an empty key: write keys apart by single dots (customer.id, items[0].sku)", s)
		}
		for rest != "" {
			n, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(n)
			if !ok || err != nil || i < 0 || after != "" && !strings.HasPrefix(after, "[") {
				return nil, fmt.Errorf("JSON path %q: write an array index as a number in brackets after its key (items[0])", s)
			}
			out = append(out, pathStep{index: i, isIdx: true})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out, nil
}

// postgres is the path as a text[] literal, for Postgres's #>> operator: {"customer","id"};
// an index is its number, which #>> takes as an array's element.
func (p jsonPath) postgres() string {
	parts := make([]string, len(p))
	for i, s := range p {
		if s.isIdx {
			parts[i] = strconv.Itoa(s.index)
		} else {
			parts[i] = `"` + s.key + `"`
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// jsonPath is the path as MySQL, MariaDB and SQLite write it: $."customer"."id", $."items"[0].
func (p jsonPath) jsonPath() string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range p {
		if s.isIdx {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		} else {
			b.WriteString(`."` + s.key + `"`)
		}
	}
	return b.String()
}
