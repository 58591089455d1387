package inbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoDialectNamesOutsideDialect fails when code outside package dialect asks a dialect what
// it is rather than what it can do: a comparison of a Name() call with a string, or a switch on
// one. Every such question is a field of dialect.Caps, so that a new dialect is a capability
// record and its checks, with nothing to change in the forms (docs/dialects.md). It reads every
// non-test Go file of the repository, every module included; tests may name databases freely.
func TestNoDialectNamesOutsideDialect(t *testing.T) {
	fset := token.NewFileSet()
	read := 0
	err := filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path == "dialect" || e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		read++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (nameCall(n.X) && isString(n.Y) || nameCall(n.Y) && isString(n.X)) {
					t.Errorf("%s: compares a dialect's name; ask its capability record (dialect.Caps) instead", fset.Position(n.Pos()))
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && nameCall(n.Tag) {
					t.Errorf("%s: switches on a dialect's name; ask its capability record (dialect.Caps) instead", fset.Position(n.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 50 {
		t.Fatalf("read %d Go files; the walk missed the repository", read)
	}
}

// nameCall reports whether e is a call x.Name() without arguments.
func nameCall(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) > 0 {
		return false
	}
	s, ok := c.Fun.(*ast.SelectorExpr)
	return ok && s.Sel.Name == "Name"
}

// isString reports whether e is a string literal.
func isString(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	return ok && l.Kind == token.STRING
}
