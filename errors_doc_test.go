package inbox_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestErrorPointersResolve checks that every "see docs/errors.md#anchor" an error of the
// library's sources carries names a section of docs/errors.md, since the remedy that does not
// fit in the error lives there.
func TestErrorPointersResolve(t *testing.T) {
	doc, err := os.ReadFile("docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections[strings.ReplaceAll(strings.ToLower(m[1]), " ", "-")] = true
	}
	pointer := regexp.MustCompile(`docs/errors\.md#([a-z0-9-]+)`)
	found := 0
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range pointer.FindAllStringSubmatch(string(src), -1) {
			found++
			if !sections[m[1]] {
				t.Errorf("%s: docs/errors.md has no section #%s", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no error points to docs/errors.md")
	}
}
