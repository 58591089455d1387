package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplotReadsRoundLines rebuilds a table from two logs: round lines with and without the
// allocations and the start and shutdown times, and a later log's cell replacing an earlier
// one's.
func TestReplotReadsRoundLines(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "first.log")
	second := filepath.Join(dir, "second.log")
	write := func(path string, lines ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(first,
		"postgres  PostgreSQL 15, fsync=on",
		"postgres rowlock  W=1 batch=1  library  round 1:     1000 msgs/s",
		"postgres rowlock  W=1 batch=1  raw      round 1:     2000 msgs/s",
		"sqlite   lease    W=4 batch=16 library  round 1:    30000 msgs/s (before the first claim 810µs, after the last settlement 120µs)",
		"sqlite   lease    W=4 batch=16 raw      round 1:    20000 msgs/s",
	)
	write(second,
		"postgres rowlock  W=1 batch=1  library  round 1:     1900 msgs/s (41.5 allocs/msg; before the first claim 680µs, after the last settlement 510µs)",
		"postgres rowlock  W=1 batch=1  raw      round 1:     2000 msgs/s (38.0 allocs/msg)",
	)
	var out strings.Builder
	cfg := &config{fromLogs: []string{first, second}, out: &out}
	if err := replot(cfg); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| Postgres | rowlock | 1 | 1 | 1,900 (1,900–1,900) | 2,000 (2,000–2,000) | 0.95 | 41.5, 38.0 |",
		"| SQLite | lease | 16 | 4 | 30,000 (30,000–30,000) | 20,000 (20,000–20,000) | 1.50 | – |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the rebuilt table lacks %q:\n%s", want, out.String())
		}
	}
}
