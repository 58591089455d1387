package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

// The bench command drains prefilled tables through the library's consumer and, beside each
// library cell, through a hand-written database/sql loop running the form's own statements, and
// reports both and their ratio. See docs/benchmarks.md for what it measures and how to read it.

const benchUsage = `usage: inbox bench [flags]

Prefill -n rows (a small JSON payload), drain them with each form on each database, with each
worker count, -rounds times, through the library's consumer and through a hand-written
database/sql loop running the same statements (interleaved: library, raw, raw, library, …), and print
median, min and max msgs/s per cell and library/raw. Then enqueue-to-handler latency at a fixed
publish rate, and (with -memory) peak RSS while draining a large table.

Cells: Postgres rowlock, lease, advisory; MySQL dialect (on the MariaDB server) and MariaDB
dialect, the same three; SQLite lease; each with single deliveries (-batch 1) and batches
(-batch above 1: inbox.NewBatchConsumer, one handler call per batch, beside a raw loop running
the statements of the form's ClaimBatch and SettleBatch).

flags:
`

// benchConfig is the bench command's flags.
type benchConfig struct {
	n          int
	workers    []int
	batches    []int
	rounds     int
	dbs        []string
	forms      []string
	plot       string
	dsns       map[string]string
	poll       time.Duration
	cpuProfile string
	// fromLogs rebuilds the table and plot from the per-round lines of earlier runs' logs.
	fromLogs []string
	// countClaims logs each library drain's claims, empty claims and rows claimed.
	countClaims bool

	latencyFor     time.Duration
	latencyRate    int
	latencyWorkers int

	memory   bool
	memoryN  int
	memoryDB string

	// out receives the tables (stdout); the progress and per-round lines go to stderr.
	out io.Writer
}

// defaultDSNs are the databases of the development machines; SQLite gets a new file in a
// temporary directory unless -dsn sqlite=PATH names one.
var defaultDSNs = map[string]string{
	"postgres": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	"mysql":    "root@tcp(127.0.0.1:3306)/test",
	"mariadb":  "root@tcp(127.0.0.1:3306)/test",
}

var allDBs = []string{"postgres", "mysql", "mariadb", "sqlite"}
var allForms = []string{"rowlock", "lease", "advisory"}

// formsOn lists the forms a database runs, in the order the tables show them.
func formsOn(db string) []string {
	if db == "sqlite" {
		return []string{"lease"}
	}
	return allForms
}

func parseBenchFlags(args []string) (*benchConfig, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	cfg := &benchConfig{dsns: map[string]string{}, out: os.Stdout}
	fs.IntVar(&cfg.n, "n", 20000, "rows to prefill and drain per round")
	workers := fs.String("workers", "1,4,8", "worker counts, comma-separated")
	batches := fs.String("batch", "1,16", "rows per claim, comma-separated (above 1: the library's batch consumer, beside a raw loop running the form's batch statements)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds per cell (library and raw interleaved, each first in every other round)")
	dbs := fs.String("db", strings.Join(allDBs, ","), "databases: postgres, mysql (the MySQL dialect, on the MySQL or MariaDB server its DSN names), mariadb, sqlite")
	forms := fs.String("forms", strings.Join(allForms, ","), "forms: rowlock, lease, advisory (SQLite runs lease only)")
	fs.StringVar(&cfg.plot, "plot", "", "write an SVG plot of msgs/s by workers per cell to this path")
	fs.Func("dsn", "database=DSN, repeatable (defaults: the development machine's servers; sqlite: a new file in a temporary directory)", func(s string) error {
		name, dsn, ok := strings.Cut(s, "=")
		if !ok || !slices.Contains(allDBs, name) {
			return fmt.Errorf("-dsn %q: want database=DSN with database one of %s", s, strings.Join(allDBs, ", "))
		}
		cfg.dsns[name] = dsn
		return nil
	})
	fs.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "the library's PollInterval while draining")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this path")
	fs.Func("from-log", "rebuild the throughput table and -plot from the per-round lines of an earlier run's stderr, running nothing (repeatable: later files' cells replace earlier ones')", func(s string) error {
		cfg.fromLogs = append(cfg.fromLogs, s)
		return nil
	})
	fs.BoolVar(&cfg.countClaims, "count-claims", false, "log each library drain's claims, the claims that found nothing and the rows claimed")
	fs.DurationVar(&cfg.latencyFor, "latency-for", 5*time.Second, "publish for this long per latency cell (0: skip the latency runs)")
	fs.IntVar(&cfg.latencyRate, "latency-rate", 200, "rows published per second, one at a time, in the latency runs")
	fs.IntVar(&cfg.latencyWorkers, "latency-workers", 4, "workers of the consumer in the latency runs")
	fs.BoolVar(&cfg.memory, "memory", false, "also drain -memory-n rows with the lease form and report peak RSS (slow: not for CI)")
	fs.IntVar(&cfg.memoryN, "memory-n", 1000000, "rows for -memory")
	fs.StringVar(&cfg.memoryDB, "memory-db", "sqlite", "database for -memory: sqlite or postgres")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.workers, err = intList("workers", *workers); err != nil {
		return nil, err
	}
	if cfg.batches, err = intList("batch", *batches); err != nil {
		return nil, err
	}
	if cfg.dbs, err = nameList("db", *dbs, allDBs); err != nil {
		return nil, err
	}
	if cfg.forms, err = nameList("forms", *forms, allForms); err != nil {
		return nil, err
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.latencyRate < 1 || cfg.latencyWorkers < 1 || cfg.memoryN < 1 {
		return nil, errors.New("bench: -n, -rounds, -latency-rate, -latency-workers and -memory-n must be at least 1")
	}
	if cfg.memoryDB != "sqlite" && cfg.memoryDB != "postgres" {
		return nil, fmt.Errorf("bench: -memory-db %q: want sqlite or postgres", cfg.memoryDB)
	}
	return cfg, nil
}

func intList(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("bench: -%s %q: want positive integers, comma-separated", flagName, s)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

func nameList(flagName, s string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("bench: -%s: unknown %q: want some of %s", flagName, f, strings.Join(known, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// cell is one form on one database with one batch size and worker count; it collects the msgs/s
// of each round.
type cell struct {
	db, form string
	batch    int
	workers  int
	lib, raw []float64 // msgs/s per round; 0 for a round whose drain check failed
	// Heap allocations per message in each round (runtime.MemStats.Mallocs over the drain,
	// divided by its rows): the library's from its Run to its return, the raw loop's after its
	// statements were prepared.
	libAllocs, rawAllocs []float64
	failures             []string
	notes                []string // rounds counted with something to say: rows handled again
}

// failed records a round whose drain check failed (a row left or handled twice: the run goes on
// and the table says so) and returns any other error.
func (c *cell) failed(err error, which string, round int) error {
	var check *drainCheckError
	if !errors.As(err, &check) {
		return err
	}
	c.failures = append(c.failures, fmt.Sprintf("%s round %d not counted: %v", which, round, err))
	return nil
}

// target is one database opened for the run.
type target struct {
	name string // postgres, mysql, mariadb, sqlite
	dsn  string
	d    dialect.Runtime
	db   *sql.DB
}

func bench(ctx context.Context, args []string) error {
	cfg, err := parseBenchFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	if len(cfg.fromLogs) > 0 {
		return replot(cfg)
	}
	_, err = runBench(ctx, cfg)
	return err
}

// runBench runs the throughput cells, then the latency and memory runs cfg asks for, printing
// the tables to cfg.out; it returns the throughput cells. A round whose drain check fails is in
// its cell's failures, not an error.
func runBench(ctx context.Context, cfg *benchConfig) ([]*cell, error) {
	tmp, err := os.MkdirTemp("", "inbox-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	maxWorkers := slices.Max(cfg.workers)
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.db.Close()
		}
	}()
	for _, name := range cfg.dbs {
		forms := onlyOn(name, cfg.forms)
		if len(forms) == 0 {
			continue
		}
		dsn := cfg.dsns[name]
		if dsn == "" {
			dsn = defaultDSNs[name]
		}
		if name == "sqlite" && dsn == "" {
			dsn = filepath.Join(tmp, "bench.db")
		}
		t, err := openTarget(ctx, name, dsn, maxWorkers+2)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
		for _, form := range forms {
			if err := createBenchTable(ctx, t, form); err != nil {
				return nil, fmt.Errorf("%s: creating the %s table: %w", name, form, err)
			}
		}
	}
	if len(targets) == 0 {
		return nil, errors.New("bench: no database runs the forms asked for (SQLite runs lease only)")
	}
	printMachine(ctx, cfg.out, targets)

	// The plan, in the order it runs: per database and form, per worker count, per batch size,
	// rounds of library and raw drains interleaved.
	var cells []*cell
	drains := 0
	for _, t := range targets {
		for _, form := range onlyOn(t.name, cfg.forms) {
			for _, w := range cfg.workers {
				for _, b := range cfg.batches {
					cells = append(cells, &cell{db: t.name, form: form, batch: b, workers: w})
					drains += 2 * cfg.rounds
				}
			}
		}
	}
	bar := newBenchBar(int64(drains) * int64(cfg.n))
	defer bar.stop()

	for _, t := range targets {
		for _, form := range onlyOn(t.name, cfg.forms) {
			for _, w := range cfg.workers {
				t.db.SetMaxOpenConns(w + 2)
				t.db.SetMaxIdleConns(w + 2)
				for _, c := range cells {
					if c.db != t.name || c.form != form || c.workers != w {
						continue
					}
					library := func(r int) error {
						bar.setLabel(fmt.Sprintf("%s %s W=%d library batch %d, round %d/%d", t.name, form, w, c.batch, r, cfg.rounds))
						lib, err := drainLibrary(ctx, t, form, cfg, w, c.batch, bar)
						if err := c.failed(err, "library", r); err != nil {
							return fmt.Errorf("%s %s, %d workers, library batch %d: %w", t.name, form, w, c.batch, err)
						}
						c.lib, c.libAllocs = append(c.lib, lib.rate), append(c.libAllocs, lib.allocs)
						bar.logf("%-8s %-8s W=%d batch=%-2d library  round %d: %8.0f msgs/s (%.1f allocs/msg; before the first claim %v, after the last settlement %v)",
							t.name, form, w, c.batch, r, lib.rate, lib.allocs, lib.open.Round(10*time.Microsecond), lib.shutdown.Round(10*time.Microsecond))
						if lib.note != "" {
							c.notes = append(c.notes, fmt.Sprintf("library round %d: %s", r, lib.note))
						}
						return nil
					}
					raw := func(r int) error {
						bar.setLabel(fmt.Sprintf("%s %s W=%d raw batch %d, round %d/%d", t.name, form, w, c.batch, r, cfg.rounds))
						rate, allocs, err := drainRaw(ctx, t, form, cfg, w, c.batch, bar)
						if err := c.failed(err, "raw", r); err != nil {
							return fmt.Errorf("%s %s, %d workers, raw batch %d: %w", t.name, form, w, c.batch, err)
						}
						c.raw, c.rawAllocs = append(c.raw, rate), append(c.rawAllocs, allocs)
						bar.logf("%-8s %-8s W=%d batch=%-2d raw      round %d: %8.0f msgs/s (%.1f allocs/msg)", t.name, form, w, c.batch, r, rate, allocs)
						return nil
					}
					// A cell's rounds run together, the library first in odd rounds and the raw
					// loop first in even ones: a drain runs slower right after a heavier one (the
					// database is still writing out the one before), and neither side may always
					// be the one that follows it.
					for r := 1; r <= cfg.rounds; r++ {
						first, second := library, raw
						if r%2 == 0 {
							first, second = raw, library
						}
						if err := first(r); err != nil {
							return nil, err
						}
						if err := second(r); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	bar.stop()

	fmt.Fprintf(cfg.out, "\nThroughput: %d rows per round, %d rounds, msgs/s median (min–max)\n\n", cfg.n, cfg.rounds)
	printCells(cfg.out, cells)
	for _, c := range cells {
		for _, f := range slices.Concat(c.failures, c.notes) {
			fmt.Fprintf(cfg.out, "\n%s %s, batch %d, %d workers: %s", dbLabel(c.db), c.form, c.batch, c.workers, f)
		}
	}
	if cfg.plot != "" {
		if err := writePlot(cfg.plot, cells, cfg); err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.out, "\nplot written to %s\n", cfg.plot)
	}

	if cfg.latencyFor > 0 {
		fmt.Fprintf(cfg.out, "\nLatency: enqueue to handler, %d rows/s one at a time for %s, %d workers\n\n", cfg.latencyRate, cfg.latencyFor, cfg.latencyWorkers)
		if err := runLatency(ctx, targets, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.memory {
		if err := runMemory(ctx, cfg, tmp); err != nil {
			return nil, err
		}
	}
	return cells, nil
}

// onlyOn keeps the forms that run on database db.
func onlyOn(db string, forms []string) []string {
	var out []string
	for _, f := range forms {
		if slices.Contains(formsOn(db), f) {
			out = append(out, f)
		}
	}
	return out
}

// printMachine prints what the numbers depend on: cores and each server's version and fsync.
func printMachine(ctx context.Context, out io.Writer, targets []*target) {
	fmt.Fprintf(out, "machine   %d cores (GOMAXPROCS %d), %s\n", numCPU(), gomaxprocs(), goVersion())
	for _, t := range targets {
		fmt.Fprintf(out, "%-9s %s\n", t.name, serverFacts(ctx, t))
	}
}
