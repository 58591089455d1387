package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TestBenchCommandTiny runs the bench command's code path on every database reachable, 500
// rows a round, so that the command cannot rot: every form, single deliveries and batches of 16,
// 1 and 4 workers, one round of the library and one of the raw loop per cell, then the latency
// runs. Each drain must empty its table with every row handled once (the drain check), and the
// throughput table, the latency table and the plot must come out.
//
// The servers are those of the live tests (INBOX_POSTGRES_DSN, INBOX_MYSQL_DSN,
// INBOX_MARIADB_DSN), each in a database of the test's own; one that does not answer is left
// out, or fails the test under INBOX_REQUIRE_DATABASES=1. The databases run side by side, and
// Postgres and SQLite commit without waiting for the disk: this measures nothing, and CI's
// clock is short.
func TestBenchCommandTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runs := []*tinyRun{{db: "sqlite", dsn: "file:" + filepath.Join(t.TempDir(), "bench.db") +
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)"}}
	for _, s := range []struct{ name, env string }{{"postgres", "INBOX_POSTGRES_DSN"}, {"mysql", "INBOX_MYSQL_DSN"}, {"mariadb", "INBOX_MARIADB_DSN"}} {
		dsn := os.Getenv(s.env)
		if dsn == "" {
			dsn = defaultDSNs[s.name]
		}
		scratch, err := scratchDatabase(ctx, t, s.name, dsn)
		if err != nil {
			if os.Getenv("INBOX_REQUIRE_DATABASES") == "1" {
				t.Fatalf("database required (INBOX_REQUIRE_DATABASES=1): %s at %s: %v", s.name, dsn, err)
			}
			t.Logf("%s left out: %v", s.name, err)
			continue
		}
		runs = append(runs, &tinyRun{db: s.name, dsn: scratch})
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		r.plot = filepath.Join(t.TempDir(), "bench.svg")
		wg.Go(func() { r.run(ctx) })
	}
	wg.Wait()

	for _, r := range runs {
		t.Logf("%s:\n%s", r.db, r.out.String())
		if r.err != nil {
			t.Errorf("%s: %v", r.db, r.err)
			continue
		}
		for _, want := range []string{"| database | form | batch | workers | library msgs/s |", "| database | form | publish | p50 |"} {
			if !strings.Contains(r.out.String(), want) {
				t.Errorf("%s: the output has no table headed %q", r.db, want)
			}
		}
		svg, err := os.ReadFile(r.plot)
		if err != nil {
			t.Error(err)
		} else if !strings.HasPrefix(string(svg), "<svg") {
			t.Errorf("%s: the plot is not an SVG:\n%.300s", r.db, svg)
		}
		for _, form := range formsOn(r.db) {
			if panel := dbLabel(r.db) + ", " + form; !strings.Contains(string(svg), panel) {
				t.Errorf("%s: the plot has no panel %q", r.db, panel)
			}
			for _, w := range r.cfg.workers {
				for _, b := range r.cfg.batches {
					checkTinyCell(t, r.cells, r.out.String(), r.db, form, w, b)
				}
			}
		}
	}
}

// tinyRun is the tiny bench on one database.
type tinyRun struct {
	db, dsn, plot string
	cfg           *benchConfig
	out           strings.Builder
	cells         []*cell
	err           error
}

func (r *tinyRun) run(ctx context.Context) {
	r.cfg, r.err = parseBenchFlags([]string{"-db", r.db, "-dsn", r.db + "=" + r.dsn, "-n", "500", "-rounds", "1",
		"-workers", "1,4", "-batch", "1,16", "-latency-for", "100ms", "-latency-rate", "100", "-plot", r.plot})
	if r.err != nil {
		return
	}
	r.cfg.out = &r.out
	r.cells, r.err = runBench(ctx, r.cfg)
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
	if len(counted(c.raw)) != 1 {
		t.Errorf("%s: raw rounds %v, want one counted", name, c.raw)
	}
	if len(counted(c.lib)) != 1 {
		t.Errorf("%s: library rounds %v, want one counted", name, c.lib)
	}
	if row := fmt.Sprintf("| %s | %s | %d | %d | ", dbLabel(db), form, b, w); !strings.Contains(out, row) {
		t.Errorf("%s: the table has no row starting %q", name, row)
	}
}

// scratchDatabase creates a database of the test's own on the server dsn names, dropped when
// the test ends, and returns its DSN: a bench table of the test's then never meets one of a
// bench run, or of another test process, on the same server.
func scratchDatabase(ctx context.Context, t *testing.T, name, dsn string) (string, error) {
	driver, source, scratch := "pgx", dsn, fmt.Sprintf("inbox_bench_test_%d_%s", os.Getpid(), name)
	var (
		scratchDSN, drop string
		create           []string
	)
	switch name {
	case "postgres":
		u, err := url.Parse(dsn)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return "", fmt.Errorf("want a postgres:// URL, got %q", dsn)
		}
		u.Path = "/" + scratch
		scratchDSN = u.String()
		create = []string{`CREATE DATABASE "` + scratch + `"`, `ALTER DATABASE "` + scratch + `" SET synchronous_commit = off`}
		drop = `DROP DATABASE IF EXISTS "` + scratch + `" WITH (FORCE)` // FORCE: Postgres 13 or later
	default:
		mc, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
		if err != nil {
			return "", err
		}
		driver, source = "mysql", mc.FormatDSN()
		mc.DBName = scratch
		scratchDSN = mc.FormatDSN()
		create = []string{"CREATE DATABASE `" + scratch + "`"}
		drop = "DROP DATABASE IF EXISTS `" + scratch + "`"
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		return "", err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return "", err
	}
	t.Cleanup(func() {
		defer db.Close()
		if _, err := db.ExecContext(context.Background(), drop); err != nil {
			t.Errorf("%s: %v", drop, err)
		}
	})
	for _, q := range create {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	return scratchDSN, nil
}

func TestBenchFlags(t *testing.T) {
	cfg, err := parseBenchFlags([]string{"-workers", "8,1,4,4", "-db", "postgres,sqlite", "-dsn", "postgres=postgres://x/y"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.workers; len(got) != 3 || got[0] != 1 || got[2] != 8 {
		t.Errorf("-workers 8,1,4,4 parsed as %v, want [1 4 8]", got)
	}
	if cfg.dsns["postgres"] != "postgres://x/y" {
		t.Errorf("-dsn postgres=… parsed as %q", cfg.dsns["postgres"])
	}
	for _, bad := range [][]string{{"-workers", "0"}, {"-db", "oracle"}, {"-forms", "queue"}, {"-dsn", "nothing"}, {"-memory-db", "mysql"}} {
		if _, err := parseBenchFlags(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestMedianAndThousands(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3,1,2 = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4,1,2,3 = %v", m)
	}
	for in, want := range map[float64]string{7: "7", 1234: "1,234", 1234567.4: "1,234,567", 100000: "100,000"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}
