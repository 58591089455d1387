package main

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeSchema matches a DDL block of the README with the commands that print it, one
// "<!-- inbox schema -db name -->" line each, right above it.
var readmeSchema = regexp.MustCompile("((?:<!-- inbox schema -db [a-z]+ -->\n)+)```sql\n((?s:.*?))```\n")

// TestREADMEDDLIsWhatSchemaPrints fails where a DDL block of the README differs from what the
// command above it prints, so that the two cannot drift: rewrite the block with its command's
// output.
func TestREADMEDDLIsWhatSchemaPrints(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range readmeSchema.FindAllStringSubmatch(string(readme), -1) {
		for _, line := range strings.Split(strings.TrimSpace(m[1]), "\n") {
			db := strings.TrimSuffix(strings.TrimPrefix(line, "<!-- inbox schema -db "), " -->")
			seen[db] = true
			code, out, errOut := inboxRun(t, "schema", "-db", db)
			if code != 0 {
				t.Fatalf("inbox schema -db %s: exit %d\n%s", db, code, errOut)
			}
			if out != m[2] {
				t.Errorf("README.md: the block under %q differs from what the command prints; put its output there:\n%s", line, out)
			}
		}
	}
	for _, db := range []string{"postgres", "mysql", "mariadb", "sqlite"} {
		if !seen[db] {
			t.Errorf("README.md has no DDL block under <!-- inbox schema -db %s -->", db)
		}
	}
}

// readmeQuickStart matches the README's Quick start program: the first ```go block of its
// section.
var readmeQuickStart = regexp.MustCompile("(?s)\n## Quick start\n.*?\n```go\n(.*?)```\n")

// TestREADMEQuickStartSchemaIsWhatSchemaPrints fails where the Quick start's schema constant
// differs from what the inbox schema command named in its doc comment prints, so that the
// first DDL a reader runs is the command's, claim index included: rewrite the constant with
// the command's output, or the command with the flags of the table the program describes.
func TestREADMEQuickStartSchemaIsWhatSchemaPrints(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := readmeQuickStart.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block under \"## Quick start\"")
	}
	args, schema := quickStartSchema(t, string(m[1]))
	if len(args) < 2 || args[0] != "schema" || !slices.Contains(args, "sqlite") {
		t.Fatalf("README.md: the Quick start's schema comment names %q, not an inbox schema command for -db sqlite", "inbox "+strings.Join(args, " "))
	}
	code, out, errOut := inboxRun(t, args...)
	if code != 0 {
		t.Fatalf("inbox %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	if !strings.Contains(out, "CREATE INDEX") {
		t.Fatalf("inbox %s printed no claim index:\n%s", strings.Join(args, " "), out)
	}
	if schema != out {
		t.Errorf("README.md: the Quick start's schema differs from what inbox %s prints; put its output there:\n%s\nit holds:\n%s", strings.Join(args, " "), out, schema)
	}

	// The examples module runs the Quick start as Example_quickStart: the same command, the
	// same schema.
	const example = "../../examples/quickstart_test.go"
	src, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	exArgs, exSchema := quickStartSchema(t, string(src))
	if !slices.Equal(exArgs, args) || exSchema != schema {
		t.Errorf("%s: its schema or the command in its comment (inbox %s) differ from the README's Quick start's (inbox %s): copy the README's", example, strings.Join(exArgs, " "), strings.Join(args, " "))
	}
}

// quickStartSchema returns, from the Quick start's source (the README's, or its Example's), the arguments of the inbox command
// its constant schema's doc comment names (the line that starts "inbox schema"), and the
// constant's value.
func quickStartSchema(t *testing.T, src string) (args []string, schema string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("the Quick start does not parse: %v", err)
	}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if len(v.Names) != 1 || v.Names[0].Name != "schema" || len(v.Values) != 1 {
				continue
			}
			for _, line := range strings.Split(g.Doc.Text(), "\n") {
				if line = strings.TrimSpace(line); strings.HasPrefix(line, "inbox schema ") {
					args = strings.Fields(line)[1:]
				}
			}
			if args == nil {
				t.Fatal("the Quick start's schema constant has no doc comment line \"inbox schema …\" naming the command that prints it")
			}
			return args, constString(t, fset, src, v.Values[0])
		}
	}
	t.Fatal("the Quick start declares no constant schema")
	return nil, ""
}

// constString evaluates the constant string expression e of src, as the compiler does.
func constString(t *testing.T, fset *token.FileSet, src string, e ast.Expr) string {
	t.Helper()
	text := src[fset.Position(e.Pos()).Offset:fset.Position(e.End()).Offset]
	file := "package p\n\nconst schema = " + text + "\n"
	files := token.NewFileSet()
	g, err := parser.ParseFile(files, "schema.go", file, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{}).Check("p", files, []*ast.File{g}, info); err != nil {
		t.Fatalf("the Quick start's schema is not a constant string: %v", err)
	}
	for id, obj := range info.Defs {
		if c, ok := obj.(*types.Const); ok && id.Name == "schema" && c.Val().Kind() == constant.String {
			return constant.StringVal(c.Val())
		}
	}
	t.Fatal("the Quick start's schema is not a constant string")
	return ""
}
