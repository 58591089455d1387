// Command groups measures what FIFO groups (inbox.Table.GroupKey) cost a consumer of each form
// -forms names (lease by default; rowlock and advisory not on SQLite): it drains one prefilled
// table, whose rows are spread over -groups groups, through a consumer whose table names the
// group column (each claim takes only the heads of free groups and holds their groups: in
// inbox_groups by a lease, by a row lock on their row of it, or by a session lock) and through
// one that ignores it, in the same run, rounds interleaved, and reports each cell's medians and
// their paired ratio. With -round-robin (the lease form only) it drains the grouped table
// through a consumer whose claims spread across the groups (lease.Config.GroupsRoundRobin) and
// through one in the usual order instead. See docs/groups.md.
//
//	go run ./bench/cmd/groups -db postgres,mariadb,sqlite -workers 1,8 -groups 32 -n 5000 -rounds 5
//	go run ./bench/cmd/groups -round-robin -db postgres,mariadb,sqlite -workers 1,8 -groups 32 -n 2000 -rounds 3
//	go run ./bench/cmd/groups -forms rowlock,advisory -db postgres,mariadb -workers 1,8 -groups 32 -n 2000 -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// config is the command's flags.
type config struct {
	n, rounds, groups int
	roundRobin        bool
	workers           []int
	dbs, forms        []string
	poll, work        time.Duration
	dsns              map[string]string
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("groups", flag.ContinueOnError)
	cfg := &config{dsns: map[string]string{}}
	fs.IntVar(&cfg.n, "n", 5000, "rows to prefill and drain per drain")
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds per cell (each a drain with groups and one without, their order alternating)")
	fs.IntVar(&cfg.groups, "groups", 32, "groups the rows are spread over (at least 1)")
	workers := fs.String("workers", "1,8", "worker counts, comma-separated")
	dbs := fs.String("db", "postgres,mariadb,sqlite", "databases: postgres, mysql, mariadb, sqlite")
	fs.BoolVar(&cfg.roundRobin, "round-robin", false, "compare claims spread across the groups (lease.Config.GroupsRoundRobin) with the usual order, both with groups, rather than groups with none")
	fs.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "the consumers' PollInterval")
	fs.DurationVar(&cfg.work, "work", 0, "how long each handler runs (0: it acks at once, so a drain measures the claims and settlements alone)")
	forms := fs.String("forms", "lease", "forms, comma-separated: lease, rowlock, advisory (rowlock and advisory not on sqlite, nor with -round-robin)")
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
	if cfg.roundRobin && !slices.Equal(cfg.forms, []string{"lease"}) {
		return nil, errors.New("-round-robin: the lease form only (-forms lease)")
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.groups < 1 {
		return nil, errors.New("-n, -rounds and -groups must be at least 1")
	}
	return cfg, nil
}

func main() { harness.Main("groups", run) }

// handle is the handlers' work: none, or a sleep of cfg.work.
func (cfg *config) handle() func([]byte) {
	if cfg.work <= 0 {
		return nil
	}
	return func([]byte) { time.Sleep(cfg.work) }
}

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
	groups := fmt.Sprint(cfg.groups) + " groups"
	if cfg.roundRobin {
		fmt.Printf("\nThe lease form with the rows in %d FIFO groups, claims spread across the groups (round robin) against the usual order: %d rows per drain, %d rounds, msgs/s median (min–max)\n\n", cfg.groups, cfg.n, cfg.rounds)
		harness.PrintPairs(os.Stdout, groups, "round robin", "round robin/usual (paired)", cells)
	} else {
		fmt.Printf("\nEach form with the rows in %d FIFO groups against the same rows without: %d rows per drain, %d rounds, msgs/s median (min–max)\n\n", cfg.groups, cfg.n, cfg.rounds)
		harness.PrintPairs(os.Stdout, "no groups", groups, "with/without (paired)", cells)
	}
	return nil
}

// createTable creates form's table on t and returns its name: a table of the form's own (the
// lease form's keeps its name of before).
func createTable(ctx context.Context, t *harness.Target, form string) (string, error) {
	table := "inbox_bench_groups_" + t.Name
	if form != "lease" {
		table += "_" + form
	}
	if err := t.CreateGroupTable(ctx, table); err != nil {
		return "", err
	}
	return table, nil
}

// runCell drains the table once without groups and once with them each round, in c.Plain and
// c.With (with -round-robin: once with groups in the usual order, once spreading the claims
// across them), alternating which goes first (harness.Rounds), the table prefilled and its rows
// spread over the groups before each drain.
func runCell(ctx context.Context, t *harness.Target, c *harness.Pair, table string, cfg *config) error {
	drain := func(groups, roundRobin bool, into *[]float64) func(r int) error {
		return func(r int) error {
			if err := t.Prefill(ctx, table, cfg.n); err != nil {
				return err
			}
			if err := t.SetGroups(ctx, table, cfg.groups); err != nil {
				return err
			}
			d, err := harness.DrainLibrary(ctx, t, harness.Consumer{Form: c.Form, Table: table, Workers: c.Workers, Batch: 1, Poll: cfg.poll, Groups: groups, RoundRobin: roundRobin, Handle: cfg.handle()}, int64(cfg.n))
			if err != nil {
				return fmt.Errorf("%s, %s, %d workers, groups %v, round robin %v, round %d: %w", c.Form, c.DB, c.Workers, groups, roundRobin, r, err)
			}
			*into = append(*into, d.Rate)
			fmt.Fprintf(os.Stderr, "%-8s %-8s W=%d groups=%-5v rr=%-5v round %d: %8.0f msgs/s, %d claims (%d empty) of %d rows\n", c.Form, c.DB, c.Workers, groups, roundRobin, r, d.Rate, d.Claims, d.EmptyClaims, d.RowsClaimed)
			return nil
		}
	}
	if cfg.roundRobin {
		return harness.Rounds(cfg.rounds, drain(true, false, &c.Plain), drain(true, true, &c.With))
	}
	return harness.Rounds(cfg.rounds, drain(false, false, &c.Plain), drain(true, false, &c.With))
}
