// Command peers drains the same prefilled work through this library's forms and through the Go
// queues a user would pick instead (River and gue on Postgres, River and goqite on SQLite), in
// one process, rounds interleaved, with the same rows, payload and worker counts, and reports
// each peer as a ratio to our best form on the same database.
//
//	go run ./bench/cmd/peers                                  # from the repository's root
//	go run ./bench/cmd/peers -n 500 -rounds 1 -workers 1,4    # a quick look
//
// Our forms run twice: single deliveries, and batches of 16 (inbox.NewBatchConsumer). The table
// gives each peer's ratio to our best form of each kind on the same database.
//
// It lives in a module of its own (bench/) so that the peers' dependencies never reach the
// library's.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// contender is one way to drain a table: a form of ours or a peer.
type contender interface {
	// name is how the tables show it ("ours: rowlock", "River", …).
	name() string
	ours() bool
	// batch is how many rows a handler call takes: 1, or the batch size of our batched forms.
	batch() int
	// prefill empties the contender's table and inserts n rows (payloadOf(1…n)), untimed.
	prefill(ctx context.Context, n int) error
	// drain handles the n rows with w workers and returns once every row is settled and the
	// contender stopped; the time it took is the measurement.
	drain(ctx context.Context, n, w int) (time.Duration, error)
	close()
}

type config struct {
	n          int
	workers    []int
	rounds     int
	dbs        []string
	peers      []string
	pgDSN      string
	sqlitePool int
	out        io.Writer // the tables; the per-round lines go to stderr
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil || cfg == nil {
		return err
	}
	results, err := runPeers(ctx, cfg)
	if err != nil {
		return err
	}
	report(cfg.out, results)
	return nil
}

// parseFlags reads the command's flags; it returns a nil config after -h.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	cfg := &config{out: os.Stdout}
	fs.IntVar(&cfg.n, "n", 20000, "rows to prefill and drain per round")
	workers := fs.String("workers", "1,4,8", "worker counts, comma-separated")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds (every contender once per round, interleaved)")
	dbs := fs.String("db", "postgres,sqlite", "databases: postgres, sqlite")
	peers := fs.String("peers", "river,gue,goqite", "peers: river (Postgres and SQLite), gue (Postgres), goqite (SQLite)")
	fs.StringVar(&cfg.pgDSN, "dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "Postgres DSN")
	fs.IntVar(&cfg.sqlitePool, "sqlite-pool", 1, "the peers' connection pool on SQLite (River and goqite both recommend 1; ours takes workers+2)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	for _, f := range strings.Split(*workers, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 {
			return nil, fmt.Errorf("-workers %q: want positive integers", *workers)
		}
		cfg.workers = append(cfg.workers, w)
	}
	var err error
	if cfg.dbs, err = names("-db", *dbs, "postgres", "sqlite"); err != nil {
		return nil, err
	}
	if cfg.peers, err = names("-peers", *peers, "river", "gue", "goqite"); err != nil {
		return nil, err
	}
	if cfg.n < 1 || cfg.rounds < 1 || cfg.sqlitePool < 1 {
		return nil, errors.New("-n, -rounds and -sqlite-pool must be at least 1")
	}
	return cfg, nil
}

// names splits a flag's comma-separated value and refuses a name not among known.
func names(flag, value string, known ...string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(value, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("%s: unknown %q: want some of %s", flag, n, strings.Join(known, ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

// oursBatch is the batch size of our batched contenders.
const oursBatch = 16

// runPeers drains every contender on each database of cfg and returns the measurements.
func runPeers(ctx context.Context, cfg *config) ([]*result, error) {
	tmp, err := os.MkdirTemp("", "inbox-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	maxW := slices.Max(cfg.workers)

	fmt.Fprintf(cfg.out, "machine   %d cores, %s; %d rows per round, %d rounds\n", runtime.NumCPU(), runtime.Version(), cfg.n, cfg.rounds)
	var results []*result
	for _, db := range cfg.dbs {
		var cs []contender
		closeAll := func() {
			for _, c := range cs {
				c.close()
			}
		}
		switch db {
		case "postgres":
			for _, batch := range []int{1, oursBatch} {
				for _, form := range []string{"rowlock", "lease"} {
					c, err := newOursPostgres(ctx, cfg.pgDSN, form, batch, maxW)
					if err != nil {
						closeAll()
						return nil, err
					}
					cs = append(cs, c)
				}
			}
			if slices.Contains(cfg.peers, "river") {
				c, err := newRiverPostgres(ctx, cfg.pgDSN, maxW)
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("River on Postgres: %w", err)
				}
				cs = append(cs, c)
			}
			if slices.Contains(cfg.peers, "gue") {
				c, err := newGue(ctx, cfg.pgDSN, maxW)
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("gue: %w", err)
				}
				cs = append(cs, c)
			}
		case "sqlite":
			for _, batch := range []int{1, oursBatch} {
				c, err := newOursSQLite(ctx, tmp+"/ours-"+strconv.Itoa(batch)+".db", batch, maxW)
				if err != nil {
					closeAll()
					return nil, err
				}
				cs = append(cs, c)
			}
			if slices.Contains(cfg.peers, "river") {
				c, err := newRiverSQLite(ctx, tmp+"/river.db", cfg.sqlitePool)
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("River on SQLite: %w", err)
				}
				cs = append(cs, c)
			}
			if slices.Contains(cfg.peers, "goqite") {
				c, err := newGoqite(ctx, tmp+"/goqite.db", cfg.sqlitePool)
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("goqite: %w", err)
				}
				cs = append(cs, c)
			}
		default:
			return nil, fmt.Errorf("-db: unknown %q: want postgres or sqlite", db)
		}
		fmt.Fprintf(cfg.out, "%-9s %s\n", db, describe(ctx, db, cfg.pgDSN))
		res, err := measure(ctx, db, cs, cfg)
		closeAll()
		if err != nil {
			return nil, err
		}
		results = append(results, res...)
	}
	return results, nil
}

// result is one contender on one database with one worker count.
type result struct {
	db, name string
	ours     bool
	batch    int
	workers  int
	rates    []float64
}

// measure runs every contender once per round for each worker count, interleaved. Each round
// starts one contender further along: a drain runs slower right after a heavier one (the
// database still writing out the one before), and no contender may always be the one after
// the same other.
func measure(ctx context.Context, db string, cs []contender, cfg *config) ([]*result, error) {
	var out []*result
	for _, w := range cfg.workers {
		row := make([]*result, len(cs))
		for i, c := range cs {
			row[i] = &result{db: db, name: c.name(), ours: c.ours(), batch: c.batch(), workers: w}
		}
		for r := 1; r <= cfg.rounds; r++ {
			for k := range cs {
				i := (r - 1 + k) % len(cs)
				c := cs[i]
				if err := c.prefill(ctx, cfg.n); err != nil {
					return nil, fmt.Errorf("%s, %s: prefilling: %w", db, c.name(), err)
				}
				elapsed, err := c.drain(ctx, cfg.n, w)
				if err != nil {
					return nil, fmt.Errorf("%s, %s, %d workers: %w", db, c.name(), w, err)
				}
				rate := float64(cfg.n) / elapsed.Seconds()
				row[i].rates = append(row[i].rates, rate)
				fmt.Fprintf(os.Stderr, "%-8s %-16s W=%d round %d: %8.0f msgs/s\n", db, c.name(), w, r, rate)
			}
		}
		out = append(out, row...)
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
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", dbLabel(r.db), r.workers, r.name, spread(r.rates), single, batched)
	}
}

// ratio is the median of our best form among those kind keeps, on r's database with r's
// workers, over r's median, naming that form.
func ratio(results []*result, r *result, kind func(*result) bool) string {
	var best *result
	for _, o := range results {
		if o.ours && kind(o) && o.db == r.db && o.workers == r.workers && (best == nil || median(o.rates) > median(best.rates)) {
			best = o
		}
	}
	if best == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f (%s)", median(best.rates)/median(r.rates), strings.TrimPrefix(best.name, "ours: "))
}

func dbLabel(db string) string {
	if db == "postgres" {
		return "Postgres"
	}
	return "SQLite"
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(v []float64) string {
	return fmt.Sprintf("%.0f (%.0f–%.0f)", median(v), slices.Min(v), slices.Max(v))
}

// payloadOf is row seq's payload, the same small JSON the inbox bench command publishes.
func payloadOf(seq int) []byte {
	return []byte(`{"seq":` + strconv.Itoa(seq) + `,"account":"acct-` + strconv.Itoa(seq%50) + `","amount_cents":` + strconv.Itoa(100+seq%9900) + `}`)
}

// sqliteSource is the same SQLite file setup as the inbox bench command's: WAL, a busy timeout,
// synchronous FULL (every commit on disk).
func sqliteSource(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)"
}

// describe names a database's version and durability settings.
func describe(ctx context.Context, db, pgDSN string) string {
	var source, driver, query string
	if db == "postgres" {
		driver, source = "pgx", pgDSN
		query = "SELECT 'PostgreSQL ' || current_setting('server_version') || ', fsync=' || current_setting('fsync') || ', synchronous_commit=' || current_setting('synchronous_commit')"
	} else {
		driver, source = "sqlite", "file::memory:"
		query = "SELECT 'SQLite ' || sqlite_version() || ' (github.com/glebarez/go-sqlite), WAL, synchronous FULL'"
	}
	conn, err := sql.Open(driver, source)
	if err != nil {
		return "?"
	}
	defer conn.Close()
	var s string
	if err := conn.QueryRowContext(ctx, query).Scan(&s); err != nil {
		return "? (" + err.Error() + ")"
	}
	return s
}
