package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/bench/harness/harnesstest"
)

// TestPublishTiny runs the publish command's code path with 200 rows a measurement, so that it
// cannot rot: on Postgres ours on both tables, River (InsertMany, InsertManyFast) and gue, and
// the raw publishes, on the bench table and the job table; on MariaDB and SQLite ours and the raw
// multi-row INSERTs, and on MariaDB ours again with interpolateParams=true; one round. Each
// measurement fails unless its table holds every row it published, so a rate is rows that
// landed. The servers run in databases of the test's own, side by side, and Postgres commits
// without waiting for the disk (harnesstest.Tiny): this measures nothing.
func TestPublishTiny(t *testing.T) {
	ours := []string{"ours: Enqueue, bench table", "ours: Enqueue, job table"}
	var raw []string
	for _, table := range []string{"bench table", "job table"} {
		raw = append(raw, "raw: INSERT of 50 rows a statement, "+table, "raw: INSERT of 200 rows a statement, "+table)
	}
	want := map[string][]string{
		"sqlite":  slices.Concat(ours, raw),
		"mariadb": slices.Concat(ours, raw, []string{"ours: Enqueue, bench table, interpolateParams=true", "ours: Enqueue, job table, interpolateParams=true"}),
		"postgres": slices.Concat(ours, raw, []string{"River: InsertMany (unnest)", "River: InsertManyFast (COPY)", "gue: EnqueueBatch",
			"raw: INSERT … SELECT FROM unnest(arrays), bench table", "raw: INSERT … SELECT unnest($1::text::bytea[]), bench table", "raw: COPY (pgx CopyFrom via Conn.Raw), bench table",
			"raw: INSERT … SELECT FROM unnest(arrays), job table", "raw: COPY (pgx CopyFrom via Conn.Raw), job table"}),
	}
	wantSingles := map[string][]string{
		"sqlite":   {"ours: Enqueue of one message, bench table", "ours: Enqueue of one message, job table"},
		"mariadb":  {"ours: Enqueue of one message, bench table", "ours: Enqueue of one message, job table", "ours: Enqueue of one message, bench table, interpolateParams=true"},
		"postgres": {"ours: Enqueue of one message, bench table", "ours: Enqueue of one message, job table", "River: Insert", "gue: Enqueue"},
	}
	harnesstest.Tiny(t, 5*time.Minute, "inbox_publish_test", []string{"postgres", "mariadb"}, runTiny, func(db, out string, results []*result) {
		measured := func(shape, name string) bool {
			i := slices.IndexFunc(results, func(r *result) bool { return r.shape == shape && r.name == name })
			return i >= 0 && (len(results[i].rates) == 1 && results[i].rates[0] > 0 || len(results[i].p50) == 1 && results[i].p50[0] > 0)
		}
		for _, name := range want[db] {
			if !measured("1 × 200", name) {
				t.Errorf("%s, %s: no one-call publish measured", db, name)
			}
			if !strings.HasPrefix(name, "raw: INSERT of") && !measured("4 × 50", name) {
				t.Errorf("%s, %s: no publish in calls of 50 measured", db, name)
			}
		}
		for _, name := range wantSingles[db] {
			if !measured(latencyShape, name) {
				t.Errorf("%s, %s: no single publishes measured", db, name)
			}
		}
		for _, header := range []string{"| database | calls × rows | publisher | rows/s median (min–max) | ours, bench table / this | ours, job table / this |",
			"| database | publisher | p50 ms | p99 ms | p50: this / ours, bench table | p50: this / ours, job table |"} {
			if !strings.Contains(out, header) {
				t.Errorf("%s: the output has no table headed %q", db, header)
			}
		}
		// Our calls are counted: one INSERT of 50 rows is one statement committed on its own.
		_, line, _ := strings.Cut(out, "ours: Enqueue, bench table, 4 × 50: ")
		line, _, _ = strings.Cut(line, "\n")
		if !strings.Contains(line, " 1 execs, ") || !strings.HasSuffix(line, " 0 begins, 1 commits per call") {
			t.Errorf("%s: our calls of 50 sent %q, not one statement committed on its own", db, line)
		}
	})
}

// runTiny is the tiny publish run on database db at dsn, writing the tables to out.
func runTiny(ctx context.Context, db, dsn string, out io.Writer) ([]*result, error) {
	cfg, err := parseFlags([]string{"-db", db, "-dsn", db + "=" + dsn, "-n", "200", "-call", "50", "-singles", "20",
		"-rounds", "1", "-raw", "-chunks", "50,200", "-count-trips"})
	if err != nil {
		return nil, err
	}
	cfg.out = out
	results, err := runPublish(ctx, cfg)
	if err == nil {
		report(out, cfg, results)
	}
	return results, err
}

// TestPublishRefusesBadFlags: a database or peer the command does not know, or calls that do not
// divide -n, fail at once, naming the flag.
func TestPublishRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-db", "postgres,oracle"}, {"-peers", "river,celery"}, {"-n", "1000", "-call", "300"}, {"-dsn", "oracle=x"}} {
		cfg, err := parseFlags(args)
		if err == nil || cfg != nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[len(args)-2], "-")) {
			t.Errorf("parseFlags(%q) = %v, %v; want an error naming %s", args, cfg, err, args[len(args)-2])
		}
	}
	cfg, err := parseFlags([]string{"-db", "sqlite", "-peers", "none"})
	if err != nil || !slices.Equal(cfg.dbs, []string{"sqlite"}) || cfg.peers != nil {
		t.Errorf("parseFlags(-db sqlite -peers none) = %+v, %v", cfg, err)
	}
}
