// Command kinds measures what a consumer of kinds (inbox.Kinds) pays for its claims naming its
// kinds: it drains one prefilled table, whose rows are spread over -kinds kinds, through a
// consumer that registers every kind (its claims filtered by kind) and through one that runs
// the same registered kinds behind a plain handler (its claims take every row: no kind filter),
// in the same run, rounds interleaved, and reports each cell's medians and their paired ratio.
// Both read each row's kind, dispatch it and decode its arguments alike: the claim's filter is
// all that differs. With -claims it times the lease form's claim alone instead, with and
// without the filter, in blocks that take turns. See docs/benchmarks.md.
//
//	go run ./bench/cmd/kinds -db postgres,mariadb,sqlite -workers 1,8 -kinds 50 -n 2000 -rounds 7
//	go run ./bench/cmd/kinds -db postgres,mariadb,sqlite -kinds 50 -claims 30
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// config is the command's flags.
type config struct {
	n, rounds, kinds int
	claims           int // above 0: time the claim alone, in this many blocks (runClaims)
	workers          []int
	dbs, forms       []string
	poll             time.Duration
	dsns             map[string]string
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("kinds", flag.ContinueOnError)
	cfg := &config{dsns: map[string]string{}}
	fs.IntVar(&cfg.n, "n", 5000, "rows to prefill and drain per drain")
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds per cell (each a drain with kinds and one without, their order alternating)")
	fs.IntVar(&cfg.kinds, "kinds", harness.MaxKinds, fmt.Sprintf("kinds the consumer of kinds registers, the rows spread over them (1 to %d)", harness.MaxKinds))
	workers := fs.String("workers", "1,8", "worker counts, comma-separated")
	dbs := fs.String("db", "postgres,mariadb,sqlite", "databases: postgres, mysql, mariadb, sqlite")
	forms := fs.String("forms", "lease", "forms: rowlock, lease, advisory (SQLite runs lease only)")
	fs.IntVar(&cfg.claims, "claims", 0, fmt.Sprintf("above 0: instead of draining, time the lease form's claim of one row alone, with and without the kind filter, in this many blocks of %d claims each (-workers and -forms do not apply)", claimBlock))
	fs.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "the consumers' PollInterval")
	harness.DSNFlag(fs, cfg.dsns, harness.Databases)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.workers, cfg.dbs, cfg.forms, err = harness.CellLists(*workers, *dbs, *forms); err != nil {
		return nil, err
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.claims < 0 || cfg.kinds < 1 || cfg.kinds > harness.MaxKinds {
		return nil, fmt.Errorf("-n and -rounds must be at least 1, -claims at least 0, -kinds from 1 to %d", harness.MaxKinds)
	}
	return cfg, nil
}

func main() { harness.Main("kinds", run) }

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	fmt.Printf("machine   %s\n", harness.Machine())
	if cfg.claims > 0 {
		return runClaims(ctx, cfg)
	}
	grid := harness.Grid{Workers: cfg.workers, DBs: cfg.dbs, Forms: cfg.forms, DSNs: cfg.dsns}
	cells, err := grid.RunPairs(ctx, os.Stdout,
		func(t *harness.Target, form string) (string, error) {
			table := "inbox_bench_kinds_" + t.Name + "_" + form
			return table, t.CreateKindTable(ctx, table)
		},
		func(t *harness.Target, c *harness.Pair, table string) error { return runCell(ctx, t, c, table, cfg) })
	if err != nil {
		return err
	}
	fmt.Printf("\nClaims of %d kinds against claims of every row, the same handler: %d rows per drain, %d rounds, msgs/s median (min–max)\n\n", cfg.kinds, cfg.n, cfg.rounds)
	fmt.Println("| database | form | workers | no kind filter | kind filter (" + fmt.Sprint(cfg.kinds) + " kinds) | with/without (paired) | claim cost |")
	fmt.Println("|---|---|--:|--:|--:|--:|--:|")
	for _, c := range cells {
		ratio, cost := "–", "–"
		if r := harness.PairedRatio(c.With, c.Plain); r > 0 {
			ratio, cost = fmt.Sprintf("%.3f", r), fmt.Sprintf("%+.1f%%", (1/r-1)*100)
		}
		fmt.Printf("| %s | %s | %d | %s | %s | %s | %s |\n", harness.Label(c.DB), c.Form, c.Workers, harness.Spread(c.Plain), harness.Spread(c.With), ratio, cost)
	}
	return nil
}

// runCell drains the table once without the kind filter and once with it each round (in
// c.Plain and c.With), alternating which goes first (harness.Rounds), the table prefilled and
// its rows spread over the kinds before each drain.
func runCell(ctx context.Context, t *harness.Target, c *harness.Pair, table string, cfg *config) error {
	drain := func(filtered bool, into *[]float64) func(r int) error {
		return func(r int) error {
			if err := t.Prefill(ctx, table, cfg.n); err != nil {
				return err
			}
			if err := t.SetKinds(ctx, table, cfg.kinds); err != nil {
				return err
			}
			d, err := harness.DrainLibrary(ctx, t, harness.Consumer{Form: c.Form, Table: table, Workers: c.Workers, Batch: 1, Poll: cfg.poll, Kinds: cfg.kinds, KindsUnfiltered: !filtered}, int64(cfg.n))
			if err != nil {
				return fmt.Errorf("%s %s, %d workers, %d kinds, filtered %t, round %d: %w", c.DB, c.Form, c.Workers, cfg.kinds, filtered, r, err)
			}
			*into = append(*into, d.Rate)
			fmt.Fprintf(os.Stderr, "%-8s %-8s W=%d filtered=%-5t round %d: %8.0f msgs/s\n", c.DB, c.Form, c.Workers, filtered, r, d.Rate)
			return nil
		}
	}
	return harness.Rounds(cfg.rounds, drain(false, &c.Plain), drain(true, &c.With))
}
