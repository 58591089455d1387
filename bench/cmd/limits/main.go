// Command limits measures what a concurrency limit (inbox.Table.Limits) costs a consumer of each
// form -forms names (lease by default; rowlock and advisory not on SQLite): it drains one
// prefilled table through a consumer whose queue has a limit (-limit rows in work, or the
// consumer's workers where it is 0) and through one without limits, in the same run, rounds
// interleaved, and reports each cell's medians and their paired ratio. In the lease form a
// limit costs the claim its predicate before LIMIT, a read of the slots and a slot taken per
// row, and on Postgres a pick and a stamp in a transaction instead of one statement; in the row
// lock form a read of the candidates, of each one's limits and a slot's row locked per row; in
// the advisory form a read of the queue's limits per claim and a slot's lock per row. A limit
// the workers reach (acks in flight hold their slots until they commit) holds claims back too.
// See docs/limits.md and docs/benchmarks.md.
//
//	go run ./bench/cmd/limits -db postgres,mariadb,sqlite -workers 1,8 -n 3000 -rounds 5
//	go run ./bench/cmd/limits -forms rowlock,advisory -db postgres,mariadb -workers 1,8 -n 2000 -rounds 3
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// config is the command's flags.
type config struct {
	n, rounds, limit int
	workers          []int
	dbs, forms       []string
	poll             time.Duration
	dsns             map[string]string
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("limits", flag.ContinueOnError)
	cfg := &config{dsns: map[string]string{}}
	fs.IntVar(&cfg.n, "n", 3000, "rows to prefill and drain per drain")
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds per cell (each a drain with a limit and one without, their order alternating)")
	fs.IntVar(&cfg.limit, "limit", 0, "the queue's limit of rows in work; 0: the cell's workers")
	workers := fs.String("workers", "1,8", "worker counts, comma-separated")
	dbs := fs.String("db", "postgres,mariadb,sqlite", "databases: postgres, mysql, mariadb, sqlite")
	forms := fs.String("forms", "lease", "forms, comma-separated: lease, rowlock, advisory (rowlock and advisory not on sqlite)")
	fs.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "the consumers' PollInterval")
	harness.DSNFlag(fs, cfg.dsns, harness.Databases)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.workers, err = harness.Ints("workers", *workers); err != nil {
		return nil, err
	}
	if cfg.dbs, err = harness.Names("db", *dbs, harness.Databases); err != nil {
		return nil, err
	}
	if cfg.forms, err = harness.Names("forms", *forms, harness.Forms); err != nil {
		return nil, err
	}
	if err := harness.NotOnSQLite(cfg.forms, cfg.dbs); err != nil {
		return nil, err
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.limit < 0 {
		return nil, errors.New("-n and -rounds must be at least 1, -limit at least 0")
	}
	return cfg, nil
}

func main() { harness.Main("limits", run) }

// cell is a form on one database at one worker count: msgs/s of each round's drain without
// and with a limit.
type cell struct {
	form, db      string
	workers       int
	plain, limits []float64
}

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	tmp, err := os.MkdirTemp("", "inbox-limits-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Printf("machine   %s\n", harness.Machine())
	var cells []*cell
	for _, db := range cfg.dbs {
		dsn := cmp.Or(cfg.dsns[db], harness.DefaultDSNs[db])
		if db == "sqlite" && cfg.dsns[db] == "" {
			dsn = filepath.Join(tmp, "limits.db")
		}
		t, err := harness.Open(ctx, db, dsn, slices.Max(cfg.workers)+2)
		if err != nil {
			return err
		}
		fmt.Printf("%-9s %s\n", db, t.Facts(ctx))
		for _, form := range cfg.forms {
			dbCells, err := runForm(ctx, t, form, cfg)
			if err != nil {
				t.Close()
				return err
			}
			cells = append(cells, dbCells...)
		}
		t.Close()
	}
	limit := "the workers"
	if cfg.limit > 0 {
		limit = fmt.Sprint(cfg.limit)
	}
	fmt.Printf("\nEach form with a limit of %s rows in work on its queue against the same rows without: %d rows per drain, %d rounds, msgs/s median (min–max)\n\n", limit, cfg.n, cfg.rounds)
	fmt.Println("| form | database | workers | no limit | limit | with/without (paired) |")
	fmt.Println("|---|---|--:|--:|--:|--:|")
	for _, c := range cells {
		ratio := "–"
		if r := harness.PairedRatio(c.limits, c.plain); r > 0 {
			ratio = fmt.Sprintf("%.3f", r)
		}
		fmt.Printf("| %s | %s | %d | %s | %s | %s |\n", c.form, harness.Label(c.db), c.workers, harness.Spread(c.plain), harness.Spread(c.limits), ratio)
	}
	return nil
}

// runForm runs the cells of form on t, one per worker count, over a table of the form's own
// (the lease form's keeps its name of before).
func runForm(ctx context.Context, t *harness.Target, form string, cfg *config) ([]*cell, error) {
	table := "inbox_bench_limits_" + t.Name
	if form != "lease" {
		table += "_" + form
	}
	if err := t.CreateTable(ctx, table); err != nil {
		return nil, err
	}
	if err := t.CreateLimitTables(ctx, table); err != nil {
		return nil, err
	}
	var cells []*cell
	for _, w := range cfg.workers {
		c := &cell{form: form, db: t.Name, workers: w}
		t.SetPool(w + 2)
		if err := runCell(ctx, t, c, table, cfg); err != nil {
			return nil, err
		}
		cells = append(cells, c)
	}
	return cells, nil
}

// runCell drains the table once without a limit and once with it each round, alternating
// which goes first (harness.Rounds), the table prefilled before each drain.
func runCell(ctx context.Context, t *harness.Target, c *cell, table string, cfg *config) error {
	if err := t.SetLimit(ctx, table, cmp.Or(cfg.limit, c.workers)); err != nil {
		return err
	}
	drain := func(limits bool, into *[]float64) func(r int) error {
		return func(r int) error {
			if err := t.Prefill(ctx, table, cfg.n); err != nil {
				return err
			}
			d, err := harness.DrainLibrary(ctx, t, harness.Consumer{Form: c.form, Table: table, Workers: c.workers, Batch: 1, Poll: cfg.poll, Limits: limits}, int64(cfg.n))
			if err != nil {
				return fmt.Errorf("%s, %s, %d workers, limits %v, round %d: %w", c.form, c.db, c.workers, limits, r, err)
			}
			*into = append(*into, d.Rate)
			fmt.Fprintf(os.Stderr, "%-8s %-8s W=%d limit=%-5v round %d: %8.0f msgs/s, %d claims (%d empty) of %d rows\n", c.form, c.db, c.workers, limits, r, d.Rate, d.Claims, d.EmptyClaims, d.RowsClaimed)
			return nil
		}
	}
	return harness.Rounds(cfg.rounds, drain(false, &c.plain), drain(true, &c.limits))
}
