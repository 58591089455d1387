// Command errtext measures the library's error texts: it walks the Go sources of the library's
// packages (not their tests, and not the modules that only test or benchmark it), collects the
// fixed text of every error they build (the format of fmt.Errorf and errors.New, and the kind,
// where and format of sentinel.Errorf), and prints how many there are, their median and
// longest length in bytes, and how their prefixes are ordered. docs/errors.md quotes its output.
//
//	go run ./internal/errtext        (from the repository's root)
//	go run ./internal/errtext -v     (every text, longest first)
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// skipped are the directories that hold no library code: modules that test, benchmark or show
// the library, and test data.
var skipped = map[string]bool{
	"integration": true, "sqlmocktests": true, "bench": true, "examples": true,
	"testdata": true, "errtext": true, "golden": true,
}

// whereForms are the templates sentinel's where helpers render, for a call whose where is one.
var whereForms = map[string]string{
	"Table": "table %q", "Row": "table %q, row %d", "Rows": "table %q, rows %v",
	"Queue": "table %q, queue %q", "Column": "table %q, column %q", "Batch": "table %q, batch %v",
}

type text struct {
	pos  string
	text string
}

func main() {
	verbose := flag.Bool("v", false, "print every text, longest first")
	flag.Parse()
	kinds, err := sentinelTexts("internal/sentinel/sentinel.go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "errtext:", err)
		os.Exit(1)
	}
	var texts []text
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (skipped[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		// internal/sentinel/sentinel.go holds the sentinels, whose texts are the kinds of the
		// errors that wrap them, and the helper, whose calls build no text of their own.
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.Join("internal", "sentinel", "sentinel.go") {
			return nil
		}
		found, err := collect(path, kinds)
		texts = append(texts, found...)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "errtext:", err)
		os.Exit(1)
	}
	report(texts, *verbose)
}

// sentinelTexts reads the text of each sentinel error, by its name in package sentinel and in
// the root package (ErrName).
func sentinelTexts(path string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	kinds := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
			return true
		}
		if call, ok := vs.Values[0].(*ast.CallExpr); ok && callee(call) == "errors.New" && len(call.Args) == 1 {
			if s, ok := literal(call.Args[0]); ok {
				kinds["sentinel."+vs.Names[0].Name] = s
				kinds["inbox.Err"+vs.Names[0].Name] = s
				kinds["Err"+vs.Names[0].Name] = s
			}
		}
		return true
	})
	if len(kinds) == 0 {
		return nil, fmt.Errorf("no sentinel in %s", path)
	}
	return kinds, nil
}

func collect(path string, kinds map[string]string) ([]text, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []text
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		var s string
		switch name := callee(call); name {
		case "fmt.Errorf", "errors.New":
			if len(call.Args) == 0 {
				return true
			}
			format, ok := literal(call.Args[0])
			if !ok {
				return true
			}
			s = substitute(format, call.Args[1:], kinds)
		case "sentinel.Errorf", "Errorf":
			if name == "Errorf" && !strings.HasSuffix(filepath.ToSlash(filepath.Dir(path)), "internal/sentinel") {
				return true
			}
			if len(call.Args) < 3 {
				return true
			}
			format, ok := literal(call.Args[2])
			if !ok {
				return true
			}
			s = helperText(call.Args[0], call.Args[1], format, kinds)
		default:
			return true
		}
		out = append(out, text{pos: fset.Position(call.Pos()).String(), text: s})
		return true
	})
	return out, nil
}

// helperText is the fixed text of sentinel.Errorf(kind, where, format, …).
func helperText(kind, where ast.Expr, format string, kinds map[string]string) string {
	s := "inbox: "
	if k, ok := kinds[exprString(kind)]; ok {
		s = k + ": "
	}
	w := "%v"
	if call, ok := where.(*ast.CallExpr); ok {
		name := callee(call)
		if t, ok := whereForms[name[strings.LastIndex(name, ".")+1:]]; ok {
			w = t
		}
	} else if lit, ok := literal(where); ok {
		w = lit
	}
	if w != "" {
		s += w + ": "
	}
	return s + format
}

// substitute writes a sentinel's text for a %w whose argument is the sentinel, as the error
// reads; other verbs stay as written.
func substitute(format string, args []ast.Expr, kinds map[string]string) string {
	var b strings.Builder
	arg := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		if format[i+1] == '%' {
			b.WriteString("%%")
			i++
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0123456789.", format[j]) >= 0 {
			j++
		}
		if j == len(format) {
			b.WriteString(format[i:])
			break
		}
		verb := format[i : j+1]
		if format[j] == 'w' && arg < len(args) {
			if k, ok := kinds[exprString(args[arg])]; ok {
				verb = k
			}
		}
		b.WriteString(verb)
		arg++
		i = j
	}
	return b.String()
}

func callee(call *ast.CallExpr) string { return exprString(call.Fun) }

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.IndexExpr:
		return exprString(e.X)
	}
	return ""
}

func literal(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, ok1 := literal(e.X)
			y, ok2 := literal(e.Y)
			return x + y, ok1 && ok2
		}
	}
	return "", false
}

// order names how a text's prefix is ordered: the prefix, the kind (a sentinel's text), where
// (a table, queue, column or row) and what, each where the text has it.
func order(s string, kinds map[string]string) string {
	rest, kind := s, false
	for _, k := range kinds {
		if strings.HasPrefix(s, k+": ") || s == k {
			rest, kind = strings.TrimPrefix(strings.TrimPrefix(s, k), ": "), true
			break
		}
	}
	prefixed := kind || strings.HasPrefix(s, "inbox: ")
	if !kind {
		rest = strings.TrimPrefix(rest, "inbox: ")
	}
	var o []string
	if prefixed {
		o = append(o, "inbox:")
	}
	if kind {
		o = append(o, "<kind>:")
	}
	switch {
	case isWhere(rest):
		o = append(o, "<where>:", "<what>")
	case strings.HasPrefix(rest, "%w"), strings.HasPrefix(rest, "%v"):
		o = append(o, "<cause> <what>")
	case strings.Contains(rest, "table %q") || strings.Contains(rest, "queue %q"):
		o = append(o, "<what naming where>")
	default:
		o = append(o, "<what>")
	}
	if !prefixed {
		o = append(o, "(no prefix)")
	}
	return strings.Join(o, " ")
}

// isWhere reports whether s starts with a where: a table, queue, column or row named first.
func isWhere(s string) bool {
	for _, w := range []string{"table ", "queue ", "column ", "row ", "rows "} {
		if strings.HasPrefix(s, w) {
			return true
		}
	}
	return false
}

func report(texts []text, verbose bool) {
	if len(texts) == 0 {
		fmt.Println("no error texts found: run from the repository's root")
		return
	}
	kinds, _ := sentinelTexts("internal/sentinel/sentinel.go")
	lens := make([]int, len(texts))
	orders := map[string]int{}
	for i, t := range texts {
		lens[i] = len(t.text)
		orders[order(t.text, kinds)]++
	}
	slices.Sort(lens)
	median := lens[len(lens)/2]
	if len(lens)%2 == 0 {
		median = (lens[len(lens)/2-1] + lens[len(lens)/2]) / 2
	}
	over := 0
	for _, n := range lens {
		if n > 200 {
			over++
		}
	}
	fmt.Printf("error texts: %d\nmedian length: %d\nlongest: %d\nover 200: %d\nprefix orders:\n", len(texts), median, lens[len(lens)-1], over)
	names := make([]string, 0, len(orders))
	for o := range orders {
		names = append(names, o)
	}
	slices.SortFunc(names, func(a, b string) int { return orders[b] - orders[a] })
	for _, o := range names {
		fmt.Printf("  %4d  %s\n", orders[o], o)
	}
	if verbose {
		slices.SortFunc(texts, func(a, b text) int { return len(b.text) - len(a.text) })
		for _, t := range texts {
			fmt.Printf("%4d %s: %s\n", len(t.text), t.pos, t.text)
		}
	}
}
