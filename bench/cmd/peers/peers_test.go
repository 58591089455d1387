package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/bench/harness/harnesstest"
)

// TestPeersTiny runs the peers command's code path with 500 rows a round, so that it cannot rot:
// on Postgres our row lock and lease forms (single deliveries and batches of 16), River and gue;
// on SQLite our lease form (both ways), River and goqite; 4 workers, one round. Each drain
// fails unless every row was handled once and its queue is empty afterwards, so a result is a
// drained queue. Postgres is the live tests' (INBOX_POSTGRES_DSN), in a database of the test's
// own; when it does not answer its part is left out, or fails the test under
// INBOX_REQUIRE_DATABASES=1. The two databases run side by side, and Postgres commits without
// waiting for the disk (harnesstest.Tiny): this measures nothing.
func TestPeersTiny(t *testing.T) {
	want := map[string][]string{
		"sqlite":   {"ours: lease", "ours: lease, batches of 16", "River", "goqite"},
		"postgres": {"ours: rowlock", "ours: lease", "ours: rowlock, batches of 16", "ours: lease, batches of 16", "River", "gue"},
	}
	harnesstest.Tiny(t, 5*time.Minute, "inbox_peers_test", []string{"postgres"}, runTiny, func(db, out string, results []*result) {
		for _, name := range want[db] {
			i := slices.IndexFunc(results, func(res *result) bool { return res.name == name })
			if i < 0 || len(results[i].rates) != 1 || results[i].rates[0] <= 0 {
				t.Errorf("%s, %s: no drain measured", db, name)
			}
		}
		header := "| database | workers | queue | msgs/s median (min–max) | our best single / this | our best batched / this |"
		if !strings.Contains(out, header) {
			t.Errorf("%s: the output has no table headed %q", db, header)
		}
		// Each peer's row gives both ratios, to our best form of each kind.
		for _, res := range results {
			if res.ours {
				continue
			}
			row := fmt.Sprintf("| %s | %d | %s | ", harness.Label(db), res.workers, res.name)
			i := strings.Index(out, row)
			if i < 0 {
				t.Errorf("%s: the table has no row starting %q", db, row)
				continue
			}
			line, _, _ := strings.Cut(out[i:], "\n")
			if strings.Count(line, "(") != 3 || !strings.Contains(line, "batches of 16)") {
				t.Errorf("%s: the row %q lacks a ratio to our best single or batched form", db, line)
			}
		}
	})
}

// runTiny is the tiny peers run on database db, writing the tables to out. The command takes a
// DSN for Postgres alone: on SQLite each contender opens a file of its own.
func runTiny(ctx context.Context, db, dsn string, out io.Writer) ([]*result, error) {
	// One worker count: River on SQLite drains about 20 rows a second under the race detector.
	args := []string{"-db", db, "-n", "500", "-rounds", "1", "-workers", "4"}
	if db == "postgres" {
		args = append(args, "-dsn", dsn)
	}
	cfg, err := parseFlags(args)
	if err != nil {
		return nil, err
	}
	cfg.out = out
	results, err := runPeers(ctx, cfg)
	if err == nil {
		report(out, results)
	}
	return results, err
}

// TestPeersRefusesUnknownNames: a database or peer the command does not know fails at once,
// naming the flag and what it takes, instead of running without it.
func TestPeersRefusesUnknownNames(t *testing.T) {
	for _, args := range [][]string{{"-db", "postgres,oracle"}, {"-peers", "river,celery"}, {"-db", ""}} {
		cfg, err := parseFlags(args)
		if err == nil || cfg != nil || !strings.Contains(err.Error(), args[0]+": unknown") {
			t.Errorf("parseFlags(%q) = %v, %v; want an error naming %s and the unknown name", args, cfg, err, args[0])
		}
	}
	cfg, err := parseFlags([]string{"-db", "sqlite", "-peers", "goqite, river"})
	if err != nil || !slices.Equal(cfg.dbs, []string{"sqlite"}) || !slices.Equal(cfg.peers, []string{"goqite", "river"}) {
		t.Errorf("parseFlags(-db sqlite -peers \"goqite, river\") = %+v, %v", cfg, err)
	}
}
