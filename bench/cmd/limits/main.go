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
	if cfg.workers, cfg.dbs, cfg.forms, err = harness.CellLists(*workers, *dbs, *forms); err != nil {
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

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	fmt.Printf("machine   %s\n", harness.Machine())
	grid := harness.Grid{Workers: cfg.workers, DBs: cfg.dbs, Forms: cfg.forms, DSNs: cfg.dsns}
	cells, err := grid.RunPairs(ctx, os.Stdout,
		func(t *harness.Target, form string) (string, error) { return createTable(ctx, t, form) },
		func(t *harness.Target, c *harness.Pair, table string) error { return runCell(ctx, t, c, table, cfg) })
	if err != nil {
		return err
	}
	limit := "the workers"
	if cfg.limit > 0 {
		limit = fmt.Sprint(cfg.limit)
	}
	fmt.Printf("\nEach form with a limit of %s rows in work on its queue against the same rows without: %d rows per drain, %d rounds, msgs/s median (min–max)\n\n", limit, cfg.n, cfg.rounds)
	harness.PrintPairs(os.Stdout, "no limit", "limit", "with/without (paired)", cells)
	return nil
}

// createTable creates form's table on t and returns its name: a table of the form's own (the
// lease form's keeps its name of before).
func createTable(ctx context.Context, t *harness.Target, form string) (string, error) {
	table := "inbox_bench_limits_" + t.Name
	if form != "lease" {
		table += "_" + form
	}
	if err := t.CreateTable(ctx, table); err != nil {
		return "", err
	}
	if err := t.CreateLimitTables(ctx, table); err != nil {
		return "", err
	}
	return table, nil
}

// runCell drains the table once without a limit and once with it each round (in c.Plain and
// c.With), alternating which goes first (harness.Rounds), the table prefilled before each drain.
func runCell(ctx context.Context, t *harness.Target, c *harness.Pair, table string, cfg *config) error {
	if err := t.SetLimit(ctx, table, cmp.Or(cfg.limit, c.Workers)); err != nil {
		return err
	}
	drain := func(limits bool, into *[]float64) func(r int) error {
		return func(r int) error {
			if err := t.Prefill(ctx, table, cfg.n); err != nil {
				return err
			}
			d, err := harness.DrainLibrary(ctx, t, harness.Consumer{Form: c.Form, Table: table, Workers: c.Workers, Batch: 1, Poll: cfg.poll, Limits: limits}, int64(cfg.n))
			if err != nil {
				return fmt.Errorf("%s, %s, %d workers, limits %v, round %d: %w", c.Form, c.DB, c.Workers, limits, r, err)
			}
			*into = append(*into, d.Rate)
			fmt.Fprintf(os.Stderr, "%-8s %-8s W=%d limit=%-5v round %d: %8.0f msgs/s, %d claims (%d empty) of %d rows\n", c.Form, c.DB, c.Workers, limits, r, d.Rate, d.Claims, d.EmptyClaims, d.RowsClaimed)
			return nil
		}
	}
	return harness.Rounds(cfg.rounds, drain(false, &c.Plain), drain(true, &c.With))
}
