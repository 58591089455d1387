// Command throughput drains prefilled tables through the library's consumer and, beside each
// library cell, through a hand-written database/sql loop running the form's own statements
// (built by internal/sqltext, as the forms build theirs), and reports both and their ratio,
// paired by round; then enqueue-to-handler latency, and with -memory the resident set while
// draining a large table. See docs/benchmarks.md for what it measures and how to read it.
//
//	go run ./bench/cmd/throughput                       # from the repository's root; about 45 minutes
//	go run ./bench/cmd/throughput -db postgres -forms lease -workers 1,4 -n 2000 -latency-for 0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

const usage = `usage: throughput [flags]

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

// config is the command's flags.
type config struct {
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
	// unflushedAcks sets the library's Config.UnflushedAcks, and has the raw loops ack by the
	// statements the forms then run.
	unflushedAcks bool
	// handRowLock has the row lock cells' raw loop be the one a user would write by hand
	// (handRowLock), not the form's statements.
	handRowLock bool
	// pinnedRowLock has it be pinnedRowLock, the hand loop without database/sql's transactions.
	pinnedRowLock bool
	// countTrips counts each drain's round trips and commits (harness.OpenCounting) and
	// prints them per message.
	countTrips bool
	// advisoryRaw is the advisory cells' raw loop at batch 1: "form" (the form's statements) or
	// "hand" (handAdvisory, written as a user would).
	advisoryRaw string

	latencyFor     time.Duration
	latencyRate    int
	latencyWorkers int

	memory   bool
	memoryN  int
	memoryDB string

	// out receives the tables (stdout); the progress and per-round lines go to stderr.
	out io.Writer
}

// formsOn lists the forms a database runs, in the order the tables show them.
func formsOn(db string) []string {
	if db == "sqlite" {
		return []string{"lease"}
	}
	return harness.Forms
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("throughput", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	cfg := &config{dsns: map[string]string{}, out: os.Stdout}
	fs.IntVar(&cfg.n, "n", 20000, "rows to prefill and drain per round")
	workers := fs.String("workers", "1,4,8", "worker counts, comma-separated")
	batches := fs.String("batch", "1,16", "rows per claim, comma-separated (above 1: the library's batch consumer, beside a raw loop running the form's batch statements)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds per cell (library and raw interleaved, each first in every other round)")
	dbs := fs.String("db", strings.Join(harness.Databases, ","), "databases: postgres, mysql (the MySQL dialect, on the MySQL or MariaDB server its DSN names), mariadb, sqlite")
	forms := fs.String("forms", strings.Join(harness.Forms, ","), "forms: rowlock, lease, advisory (SQLite runs lease only)")
	fs.StringVar(&cfg.plot, "plot", "", "write an SVG plot of msgs/s by workers per cell to this path")
	harness.DSNFlag(fs, cfg.dsns, harness.Databases)
	fs.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "the library's PollInterval while draining")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this path")
	fs.Func("from-log", "rebuild the throughput table and -plot from the per-round lines of an earlier run's stderr, running nothing (repeatable: later files' cells replace earlier ones')", func(s string) error {
		cfg.fromLogs = append(cfg.fromLogs, s)
		return nil
	})
	fs.BoolVar(&cfg.countClaims, "count-claims", false, "log each library drain's claims, the claims that found nothing and the rows claimed")
	fs.BoolVar(&cfg.unflushedAcks, "unflushed-acks", false, "set the library's Config.UnflushedAcks (on Postgres the forms ack without waiting for the disk); the raw loops ack by the same statements")
	fs.BoolVar(&cfg.handRowLock, "hand-rowlock", false, "the row lock cells' raw loop is the one a user would write by hand (the server's default level, its own SQL), not the form's statements")
	fs.BoolVar(&cfg.pinnedRowLock, "pinned-rowlock", false, "the row lock cells' raw loop is -hand-rowlock's on a connection pinned per worker, its statements prepared on it, BEGIN and COMMIT sent as statements: what database/sql's transactions cost")
	fs.BoolVar(&cfg.countTrips, "count-trips", false, "count each drain's round trips and commits through a counting driver wrapper, log them and print them per message beside the rates (the rates then run through the wrapper)")
	fs.StringVar(&cfg.advisoryRaw, "advisory-raw", "form", "the advisory cells' raw loop at batch 1: form (the form's statements) or hand (a loop written as a user would: the lock taken inside the candidate read on Postgres, GET_LOCK per candidate on MySQL and MariaDB; see bench/cmd/throughput/handadvisory.go)")
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
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.workers, cfg.dbs, cfg.forms, err = harness.CellLists(*workers, *dbs, *forms); err != nil {
		return nil, err
	}
	if cfg.batches, err = harness.Ints("batch", *batches); err != nil {
		return nil, err
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.latencyRate < 1 || cfg.latencyWorkers < 1 || cfg.memoryN < 1 {
		return nil, errors.New("-n, -rounds, -latency-rate, -latency-workers and -memory-n must be at least 1")
	}
	if cfg.advisoryRaw != "form" && cfg.advisoryRaw != "hand" {
		return nil, fmt.Errorf("-advisory-raw %q: want form or hand", cfg.advisoryRaw)
	}
	if cfg.memoryDB != "sqlite" && cfg.memoryDB != "postgres" {
		return nil, fmt.Errorf("-memory-db %q: want sqlite or postgres", cfg.memoryDB)
	}
	return cfg, nil
}

func main() { harness.Main("throughput", run) }

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	stop, err := harness.CPUProfile(cfg.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	if len(cfg.fromLogs) > 0 {
		return replot(cfg)
	}
	_, err = runAll(ctx, cfg)
	return err
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

	// What each counted round's drains sent, with -count-trips.
	libTraffic, rawTraffic []harness.Traffic
}

// failed records a round whose drain check failed (a row left or handled twice: the run goes on
// and the table says so) and returns any other error.
func (c *cell) failed(err error, which string, round int) error {
	var check *harness.CheckError
	if !errors.As(err, &check) {
		return err
	}
	c.failures = append(c.failures, fmt.Sprintf("%s round %d not counted: %v", which, round, err))
	return nil
}

// benchTable is the name of the table every cell of a form drains on t. The memory run passes
// "memory" for form, so that its table never meets a throughput or latency run's; two bench
// commands on one database at once still would (each drops and creates its tables when it
// starts).
func benchTable(t *harness.Target, form string) string {
	return "inbox_bench_" + t.Name + "_" + form
}

// runAll runs the throughput cells, then the latency and memory runs cfg asks for, printing
// the tables to cfg.out; it returns the throughput cells. A round whose drain check fails is in
// its cell's failures, not an error.
func runAll(ctx context.Context, cfg *config) ([]*cell, error) {
	tmp, err := os.MkdirTemp("", "inbox-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	maxWorkers := slices.Max(cfg.workers)
	var targets []*harness.Target
	defer func() {
		for _, t := range targets {
			t.Close()
		}
	}()
	for _, name := range cfg.dbs {
		forms := onlyOn(name, cfg.forms)
		if len(forms) == 0 {
			continue
		}
		open := harness.Open
		if cfg.countTrips {
			open = harness.OpenCounting
		}
		t, err := open(ctx, name, harness.DSN(cfg.dsns, name, tmp, "bench.db"), maxWorkers+2)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
		for _, form := range forms {
			if err := t.CreateTable(ctx, benchTable(t, form)); err != nil {
				return nil, err
			}
		}
	}
	if len(targets) == 0 {
		return nil, errors.New("no database runs the forms asked for (SQLite runs lease only)")
	}
	fmt.Fprintf(cfg.out, "machine   %s\n", harness.Machine())
	for _, t := range targets {
		fmt.Fprintf(cfg.out, "%-9s %s\n", t.Name, t.Facts(ctx))
	}
	if cfg.countTrips {
		if err := printBackground(ctx, cfg.out, targets); err != nil {
			return nil, err
		}
	}

	// The plan, in the order it runs: per database and form, per worker count, per batch size,
	// rounds of library and raw drains interleaved.
	var cells []*cell
	for _, t := range targets {
		for _, form := range onlyOn(t.Name, cfg.forms) {
			for _, w := range cfg.workers {
				for _, b := range cfg.batches {
					cells = append(cells, &cell{db: t.Name, form: form, batch: b, workers: w})
				}
			}
		}
	}
	bar := harness.NewBar(int64(len(cells)) * 2 * int64(cfg.rounds) * int64(cfg.n))
	defer bar.Stop()
	for _, c := range cells {
		t := targets[slices.IndexFunc(targets, func(t *harness.Target) bool { return t.Name == c.db })]
		t.SetPool(c.workers + 2)
		if err := runCell(ctx, t, c, cfg, bar); err != nil {
			return nil, err
		}
	}
	bar.Stop()

	fmt.Fprintf(cfg.out, "\nThroughput: %d rows per round, %d rounds%s, msgs/s median (min–max)\n\n", cfg.n, cfg.rounds, runNotes(cfg))
	printCells(cfg.out, cells)
	for _, c := range cells {
		for _, f := range slices.Concat(c.failures, c.notes) {
			fmt.Fprintf(cfg.out, "\n%s %s, batch %d, %d workers: %s", harness.Label(c.db), c.form, c.batch, c.workers, f)
		}
	}
	if cfg.countTrips {
		fmt.Fprintf(cfg.out, "\n\nRound trips and commits per message (-count-trips: the rates above ran through the counting wrapper), the median over %d rounds\n\n", cfg.rounds)
		printTrips(cfg.out, cells, cfg.n)
		if slices.ContainsFunc(targets, func(t *harness.Target) bool { return t.Name != "sqlite" }) {
			fmt.Fprint(cfg.out, "\nThe servers' own counters over the same drains (the whole server: other sessions' work included), per message\n\n")
			printServerCheck(cfg.out, cells, cfg.n)
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

// runNotes is what the throughput table's heading says of the run's settings.
func runNotes(cfg *config) string {
	notes := ""
	if cfg.unflushedAcks {
		notes = ", acks unflushed (Config.UnflushedAcks)"
	}
	if cfg.handRowLock {
		notes += ", the row lock form's raw loop written by hand (-hand-rowlock)"
	}
	if cfg.pinnedRowLock {
		notes += ", the row lock form's raw loop written by hand on pinned connections (-pinned-rowlock)"
	}
	return notes + handNote(cfg)
}

// runCell runs a cell's rounds, the library's drain and the raw loop's in turn (harness.Rounds).
func runCell(ctx context.Context, t *harness.Target, c *cell, cfg *config, bar *harness.Bar) error {
	library := func(r int) error {
		bar.SetLabel(fmt.Sprintf("%s %s W=%d library batch %d, round %d/%d", t.Name, c.form, c.workers, c.batch, r, cfg.rounds))
		lib, err := drainLibrary(ctx, t, c, cfg, bar)
		if err := c.failed(err, "library", r); err != nil {
			return fmt.Errorf("%s %s, %d workers, library batch %d: %w", t.Name, c.form, c.workers, c.batch, err)
		}
		if cfg.countClaims {
			bar.Logf("%s %s W=%d batch=%d: %d claims, %d found nothing, %d rows claimed", t.Name, c.form, c.workers, c.batch, lib.Claims, lib.EmptyClaims, lib.RowsClaimed)
		}
		c.lib, c.libAllocs = append(c.lib, lib.Rate), append(c.libAllocs, lib.Allocs)
		bar.Logf("%-8s %-8s W=%d batch=%-2d library  round %d: %8.0f msgs/s (%.1f allocs/msg; before the first claim %v, after the last settlement %v)",
			t.Name, c.form, c.workers, c.batch, r, lib.Rate, lib.Allocs, lib.Open.Round(10*time.Microsecond), lib.Shutdown.Round(10*time.Microsecond))
		if cfg.countTrips && lib.Rate > 0 {
			c.libTraffic = append(c.libTraffic, lib.Traffic)
			bar.Logf("%-8s %-8s W=%d batch=%-2d library  trips of round %d: %s", t.Name, c.form, c.workers, c.batch, r, lib.Traffic.Summary(t.Name, int64(cfg.n)))
		}
		if lib.Note != "" {
			c.notes = append(c.notes, fmt.Sprintf("library round %d: %s", r, lib.Note))
		}
		return nil
	}
	raw := func(r int) error {
		bar.SetLabel(fmt.Sprintf("%s %s W=%d raw batch %d, round %d/%d", t.Name, c.form, c.workers, c.batch, r, cfg.rounds))
		d, err := drainRaw(ctx, t, c, cfg, bar)
		if err := c.failed(err, "raw", r); err != nil {
			return fmt.Errorf("%s %s, %d workers, raw batch %d: %w", t.Name, c.form, c.workers, c.batch, err)
		}
		c.raw, c.rawAllocs = append(c.raw, d.rate), append(c.rawAllocs, d.allocs)
		bar.Logf("%-8s %-8s W=%d batch=%-2d raw      round %d: %8.0f msgs/s (%.1f allocs/msg)", t.Name, c.form, c.workers, c.batch, r, d.rate, d.allocs)
		if cfg.countTrips && d.rate > 0 {
			c.rawTraffic = append(c.rawTraffic, d.traffic)
			bar.Logf("%-8s %-8s W=%d batch=%-2d raw      trips of round %d: %s", t.Name, c.form, c.workers, c.batch, r, d.traffic.Summary(t.Name, int64(cfg.n)))
		}
		return nil
	}
	return harness.Rounds(cfg.rounds, library, raw)
}

// drainLibrary prefills the cell's table and drains it through the library's consumer.
func drainLibrary(ctx context.Context, t *harness.Target, c *cell, cfg *config, bar *harness.Bar) (harness.LibraryDrain, error) {
	table := benchTable(t, c.form)
	if err := t.Prefill(ctx, table, cfg.n); err != nil {
		return harness.LibraryDrain{}, fmt.Errorf("prefilling: %w", err)
	}
	return harness.DrainLibrary(ctx, t, harness.Consumer{
		Form: c.form, Table: table, Workers: c.workers, Batch: c.batch, Poll: cfg.poll,
		UnflushedAcks: cfg.unflushedAcks, Handle: func([]byte) { bar.Add(1) },
	}, int64(cfg.n))
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

// printCells writes the throughput table in Markdown.
func printCells(w io.Writer, cells []*cell) {
	fmt.Fprintln(w, "| database | form | batch | workers | library msgs/s | raw msgs/s | library/raw (paired) | allocs/msg library, raw |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|")
	for _, c := range cells {
		ratio := "–"
		if r := harness.PairedRatio(c.lib, c.raw); r > 0 {
			ratio = fmt.Sprintf("%.2f", r)
		}
		allocs := "–"
		if len(c.libAllocs) > 0 && len(c.rawAllocs) > 0 {
			allocs = fmt.Sprintf("%.1f, %.1f", harness.Median(c.libAllocs), harness.Median(c.rawAllocs))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %s |\n", harness.Label(c.db), c.form, c.batch, c.workers,
			harness.Spread(c.lib), harness.Spread(c.raw), ratio, allocs)
	}
}
