package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/bench/harness/harnesstest"
)

// TestBenchCommandTiny runs the command's code path on every database reachable, 500 rows a
// round, so that the command cannot rot: every form, single deliveries and batches of 16, 1 and
// 4 workers, one round of the library and one of the raw loop per cell, then the latency runs.
// Each drain must empty its table with every row handled once (the drain check), and the
// throughput table, the latency table and the plot must come out. The drains run through the
// counting wrapper (-count-trips), whose tables must come out too, and two raw loops whose
// statements are known must count what they send: the Postgres row lock loop's BEGIN, SELECT,
// DELETE and COMMIT (round trips on the wire), and the SQLite lease loop's BEGIN, SELECT,
// UPDATE and COMMIT, then its DELETE committed on its own (driver calls).
//
// The servers are those of the live tests, each in a database of the test's own
// (harnesstest.Tiny); one that does not answer is left out, or fails the test under
// INBOX_REQUIRE_DATABASES=1. The databases run side by side, and Postgres and SQLite commit
// without waiting for the disk: this measures nothing, and CI's clock is short.
func TestBenchCommandTiny(t *testing.T) {
	run := func(ctx context.Context, db, dsn string, out io.Writer) (tinyRun, error) {
		r := tinyRun{db: db, plot: filepath.Join(t.TempDir(), "bench.svg")}
		var err error
		r.cfg, err = parseFlags([]string{"-db", db, "-dsn", db + "=" + dsn, "-n", "500", "-rounds", "1", "-count-trips",
			"-workers", "1,4", "-batch", "1,16", "-latency-for", "100ms", "-latency-rate", "100", "-plot", r.plot})
		if err != nil {
			return r, err
		}
		r.cfg.out = out
		r.cells, err = runAll(ctx, r.cfg)
		return r, err
	}
	harnesstest.Tiny(t, 5*time.Minute, "inbox_bench_test", []string{"postgres", "mysql", "mariadb"}, run, func(db, out string, r tinyRun) {
		want := []string{"| database | form | batch | workers | library msgs/s |", "| database | form | publish | p50 |",
			"| database | form | batch | workers | round trips/msg library, raw |"}
		if db != "sqlite" {
			want = append(want, "| database | form | batch | workers | library: server / counted |")
		}
		for _, want := range want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the output has no table headed %q", db, want)
			}
		}
		svg, err := os.ReadFile(r.plot)
		if err != nil {
			t.Error(err)
		} else if !strings.HasPrefix(string(svg), "<svg") {
			t.Errorf("%s: the plot is not an SVG:\n%.300s", db, svg)
		}
		for _, form := range formsOn(db) {
			if panel := harness.Label(db) + ", " + form; !strings.Contains(string(svg), panel) {
				t.Errorf("%s: the plot has no panel %q", db, panel)
			}
			for _, w := range r.cfg.workers {
				for _, b := range r.cfg.batches {
					checkTinyCell(t, r.cells, out, db, form, w, b)
				}
			}
		}
		switch db {
		case "postgres":
			checkRawTrips(t, r, "rowlock", 4, 1)
		case "sqlite":
			checkRawTrips(t, r, "lease", 5, 2)
		}
	})
}

// checkRawTrips checks the round trips and commits per message counted of the raw loop of
// form at one worker and single deliveries: the statements of each message, and beyond them
// no more than the loop's preparing and closing of its statements (a few per drain).
func checkRawTrips(t *testing.T, r tinyRun, form string, wantTrips, wantCommits float64) {
	t.Helper()
	i := slices.IndexFunc(r.cells, func(c *cell) bool { return c.form == form && c.workers == 1 && c.batch == 1 })
	if i < 0 || len(r.cells[i].rawTraffic) != 1 {
		t.Errorf("%s %s: no traffic counted of the raw loop at 1 worker, batch 1", r.db, form)
		return
	}
	c := r.cells[i]
	if got := perMessage(c.rawTraffic, r.cfg.n, roundTrips); got < wantTrips || got > wantTrips+0.05 {
		t.Errorf("%s %s raw loop: %.3f round trips per message counted, want %.0f and its statements' preparing: %s", r.db, form, got, wantTrips, c.rawTraffic[0].Summary(r.db, int64(r.cfg.n)))
	}
	if got := perMessage(c.rawTraffic, r.cfg.n, commits); got != wantCommits {
		t.Errorf("%s %s raw loop: %.3f commits per message counted, want %.0f: %s", r.db, form, got, wantCommits, c.rawTraffic[0].Summary(r.db, int64(r.cfg.n)))
	}
}

// tinyRun is what the tiny bench on one database leaves beside its output: its flags, its
// cells and its plot.
type tinyRun struct {
	db, plot string
	cfg      *config
	cells    []*cell
}

// checkTinyCell checks that the cell ran, a counted library round and a counted raw round, and
// that the table has its row.
func checkTinyCell(t *testing.T, cells []*cell, out, db, form string, w, b int) {
	t.Helper()
	name := fmt.Sprintf("%s %s, batch %d, %d workers", db, form, b, w)
	i := slices.IndexFunc(cells, func(c *cell) bool { return c.db == db && c.form == form && c.workers == w && c.batch == b })
	if i < 0 {
		t.Errorf("%s: no such cell", name)
		return
	}
	c := cells[i]
	for _, f := range c.failures {
		t.Errorf("%s: %s", name, f)
	}
	if len(harness.Counted(c.raw)) != 1 {
		t.Errorf("%s: raw rounds %v, want one counted", name, c.raw)
	}
	if len(harness.Counted(c.lib)) != 1 {
		t.Errorf("%s: library rounds %v, want one counted", name, c.lib)
	}
	if row := fmt.Sprintf("| %s | %s | %d | %d | ", harness.Label(db), form, b, w); !strings.Contains(out, row) {
		t.Errorf("%s: the table has no row starting %q", name, row)
	}
}

func TestFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-workers", "8,1,4,4", "-db", "postgres,sqlite", "-dsn", "postgres=postgres://x/y"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.workers; !slices.Equal(got, []int{1, 4, 8}) {
		t.Errorf("-workers 8,1,4,4 parsed as %v, want [1 4 8]", got)
	}
	if cfg.dsns["postgres"] != "postgres://x/y" {
		t.Errorf("-dsn postgres=… parsed as %q", cfg.dsns["postgres"])
	}
	for _, bad := range [][]string{{"-workers", "0"}, {"-db", "oracle"}, {"-forms", "queue"}, {"-dsn", "nothing"}, {"-memory-db", "mysql"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
