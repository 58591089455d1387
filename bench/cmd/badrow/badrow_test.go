package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadrowTiny runs the command small on SQLite, so that it cannot rot: every drain is
// checked (all good rows acked); the rates are not.
func TestBadrowTiny(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-db", "sqlite", "-sqlite", filepath.Join(t.TempDir(), "badrow.db"), "-n", "20", "-rounds", "1", "-workers", "1", "-bad", "panic"}
	if err := run(args, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| SQLite | lease | 1 |") {
		t.Fatalf("no SQLite lease row in:\n%s", out.String())
	}
}
