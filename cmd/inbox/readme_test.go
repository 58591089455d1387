package main

import (
	"os"
	"regexp"
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
