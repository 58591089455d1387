// Command peers drains the same prefilled work through this library's forms and through the Go
// queues a user would pick instead (River and gue on Postgres, River and goqite on SQLite), in
// one process, rounds interleaved, with the same rows, payload and worker counts, and reports
// each peer as a ratio to our best form on the same database.
//
//	go run ./bench/cmd/peers                                  # from the repository's root
//	go run ./bench/cmd/peers -n 500 -rounds 1 -workers 1,4    # a quick look
//
// Our forms run twice: single deliveries, and batches of 16 (inbox.NewBatchConsumer), through
// the harness the throughput command drains with (bench/harness). Each peer runs through its
// own documented runner: River's client with its workers, gue's worker pool, goqite's job
// runner. The table gives each peer's ratio to our best form of each kind on the same database.
//
// It lives in a module of its own (bench/) so that the peers' dependencies never reach the
// library's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// contender is one way to drain a table: a form of ours or a peer.
type contender interface {
	// name is how the tables show it ("ours: rowlock", "River", …).
	name() string
	ours() bool
	// batch is how many rows a handler call takes: 1, or the batch size of our batched forms.
	batch() int
	// prefill empties the contender's table and inserts n rows (harness.Payload(1…n)), untimed.
	prefill(ctx context.Context, n int) error
	// drain handles the n rows with w workers and returns once every row is settled and the
	// contender stopped; the time it took is the measurement.
	drain(ctx context.Context, n, w int) (time.Duration, error)
	close()
}

// notOurs is embedded in each peer's contender: none is ours, and each hands its handler one row
// a call.
type notOurs struct{}

func (notOurs) ours() bool { return false }
func (notOurs) batch() int { return 1 }

type config struct {
	n          int
	workers    []int
	rounds     int
	dbs        []string
	peers      []string
	forms      []string // our forms on Postgres (SQLite runs the lease form alone)
	batches    []int    // our batch sizes: 1 for single deliveries, above 1 for batches
	pgDSN      string
	sqlitePool int
	out        io.Writer // the tables; the per-round lines go to stderr
}

func main() { harness.Main("peers", run) }

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	results, err := runPeers(ctx, cfg)
	if err != nil {
		return err
	}
	report(cfg.out, results)
	return nil
}

// parseFlags reads the command's flags.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	cfg := &config{out: os.Stdout}
	fs.IntVar(&cfg.n, "n", 20000, "rows to prefill and drain per round")
	workers := fs.String("workers", "1,4,8", "worker counts, comma-separated")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds (every contender once per round, interleaved)")
	dbs := fs.String("db", "postgres,sqlite", "databases: postgres, sqlite")
	peers := fs.String("peers", "river,gue,goqite", "peers: river (Postgres and SQLite), gue (Postgres), goqite (SQLite)")
	forms := fs.String("forms", "rowlock,lease", "our forms on Postgres: rowlock, lease (SQLite: lease alone)")
	batches := fs.String("batch", "1,"+strconv.Itoa(oursBatch), "our batch sizes: 1 for single deliveries, above 1 for batches of that many")
	fs.StringVar(&cfg.pgDSN, "dsn", harness.DefaultDSNs["postgres"], "Postgres DSN")
	fs.IntVar(&cfg.sqlitePool, "sqlite-pool", 1, "the peers' connection pool on SQLite (River and goqite both recommend 1; ours takes workers+2)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.workers, err = harness.Ints("workers", *workers); err != nil {
		return nil, err
	}
	if cfg.dbs, err = harness.Names("db", *dbs, []string{"postgres", "sqlite"}); err != nil {
		return nil, err
	}
	if cfg.peers, err = harness.Names("peers", *peers, []string{"river", "gue", "goqite"}); err != nil {
		return nil, err
	}
	if cfg.forms, err = harness.Names("forms", *forms, []string{"rowlock", "lease"}); err != nil {
		return nil, err
	}
	if cfg.batches, err = harness.Ints("batch", *batches); err != nil {
		return nil, err
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.sqlitePool < 1 {
		return nil, errors.New("-n, -rounds and -sqlite-pool must be at least 1")
	}
	return cfg, nil
}

// oursBatch is the batch size of our batched contenders by default.
const oursBatch = 16

// runPeers drains every contender on each database of cfg and returns the measurements.
func runPeers(ctx context.Context, cfg *config) ([]*result, error) {
	tmp, err := os.MkdirTemp("", "inbox-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	maxW := slices.Max(cfg.workers)

	fmt.Fprintf(cfg.out, "machine   %s; %d rows per round, %d rounds\n", harness.Machine(), cfg.n, cfg.rounds)
	var results []*result
	for _, db := range cfg.dbs {
		cs, err := contenders(ctx, db, cfg, tmp, maxW)
		if err == nil {
			// Ours comes first on each database: its target describes the database.
			fmt.Fprintf(cfg.out, "%-9s %s\n", db, cs[0].(*oursForm).t.Facts(ctx))
			var res []*result
			res, err = measure(ctx, db, cs, cfg)
			results = append(results, res...)
		}
		for _, c := range cs {
			c.close()
		}
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// contenders opens every contender on database db: ours first, then the peers cfg names. On an
// error it closes those it opened.
func contenders(ctx context.Context, db string, cfg *config, tmp string, maxW int) ([]contender, error) {
	var cs []contender
	add := func(c contender, err error) error {
		if err != nil {
			return err
		}
		cs = append(cs, c)
		return nil
	}
	peer := func(name string, open func() (contender, error)) error {
		if !slices.Contains(cfg.peers, name) {
			return nil
		}
		if err := add(open()); err != nil {
			return fmt.Errorf("%s on %s: %w", name, harness.Label(db), err)
		}
		return nil
	}
	err := func() error {
		switch db {
		case "postgres":
			for _, batch := range cfg.batches {
				for _, form := range cfg.forms {
					if err := add(newOurs(ctx, db, cfg.pgDSN, form, batch, maxW)); err != nil {
						return err
					}
				}
			}
			if err := peer("river", func() (contender, error) { return newRiverPostgres(ctx, cfg.pgDSN, maxW) }); err != nil {
				return err
			}
			return peer("gue", func() (contender, error) { return newGue(ctx, cfg.pgDSN, maxW) })
		case "sqlite":
			for _, batch := range cfg.batches {
				if err := add(newOurs(ctx, db, filepath.Join(tmp, "ours-"+strconv.Itoa(batch)+".db"), "lease", batch, maxW)); err != nil {
					return err
				}
			}
			if err := peer("river", func() (contender, error) { return newRiverSQLite(ctx, filepath.Join(tmp, "river.db"), cfg.sqlitePool) }); err != nil {
				return err
			}
			return peer("goqite", func() (contender, error) { return newGoqite(ctx, filepath.Join(tmp, "goqite.db"), cfg.sqlitePool) })
		}
		return fmt.Errorf("-db: unknown %q: want postgres or sqlite", db)
	}()
	if err != nil {
		for _, c := range cs {
			c.close()
		}
		return nil, err
	}
	return cs, nil
}

// result is one contender on one database with one worker count.
type result struct {
	db, name string
	ours     bool
	batch    int
	workers  int
	rates    []float64
}

// measure runs every contender once per round for each worker count, each round starting one
// contender further along (harness.Rounds).
func measure(ctx context.Context, db string, cs []contender, cfg *config) ([]*result, error) {
	bar := harness.NewBar(int64(len(cfg.workers)) * int64(cfg.rounds) * int64(len(cs)) * int64(cfg.n))
	defer bar.Stop()
	var out []*result
	for _, w := range cfg.workers {
		drains := make([]func(int) error, len(cs))
		for i, c := range cs {
			res := &result{db: db, name: c.name(), ours: c.ours(), batch: c.batch(), workers: w}
			out = append(out, res)
			drains[i] = func(r int) error {
				bar.SetLabel(fmt.Sprintf("%s %s W=%d round %d/%d", db, c.name(), w, r, cfg.rounds))
				if err := c.prefill(ctx, cfg.n); err != nil {
					return fmt.Errorf("%s, %s: prefilling: %w", db, c.name(), err)
				}
				elapsed, err := c.drain(ctx, cfg.n, w)
				if err != nil {
					return fmt.Errorf("%s, %s, %d workers: %w", db, c.name(), w, err)
				}
				rate := float64(cfg.n) / elapsed.Seconds()
				res.rates = append(res.rates, rate)
				bar.Add(int64(cfg.n))
				bar.Logf("%-8s %-16s W=%d round %d: %8.0f msgs/s", db, c.name(), w, r, rate)
				return nil
			}
		}
		if err := harness.Rounds(cfg.rounds, drains...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// report prints each contender's rates and, for the peers, our best form's median over theirs:
// our best single-delivery form, and our best batched form.
func report(w io.Writer, results []*result) {
	fmt.Fprintf(w, "\n| database | workers | queue | msgs/s median (min–max) | our best single / this | our best batched / this |\n|---|--:|---|--:|--:|--:|\n")
	for _, r := range results {
		single, batched := "–", "–"
		if !r.ours {
			single = ratio(results, r, func(o *result) bool { return o.batch == 1 })
			batched = ratio(results, r, func(o *result) bool { return o.batch > 1 })
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", harness.Label(r.db), r.workers, r.name, harness.Spread(r.rates), single, batched)
	}
}

// ratio is the median of our best form among those kind keeps, on r's database with r's
// workers, over r's median, naming that form. It is a ratio of medians, not paired by round:
// a round's contenders run one after another, not side by side in pairs.
func ratio(results []*result, r *result, kind func(*result) bool) string {
	var best *result
	for _, o := range results {
		if o.ours && kind(o) && o.db == r.db && o.workers == r.workers && (best == nil || harness.Median(o.rates) > harness.Median(best.rates)) {
			best = o
		}
	}
	if best == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f (%s)", harness.Median(best.rates)/harness.Median(r.rates), strings.TrimPrefix(best.name, "ours: "))
}
