// Command scale measures the library where a deployment grows: many consumer processes on one
// table, and a table that grows (a long drain, a large history of processed rows, many queues,
// and a sustained run on Postgres with autovacuum). See docs/benchmarks.md for what each
// scenario measures and the figures.
//
//	go run ./bench/cmd/scale -own-postgres procs drain history queues sustained
//	go run ./bench/cmd/scale -db mariadb -forms lease -procs 1,4 procs
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
	"syscall"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

const usage = `usage: scale [flags] scenario...

Scenarios:
  procs      -procs processes of -workers workers each (children: this binary in child mode)
             drain -n rows from one table, -rounds times per cell; msgs/s and rows handled twice
  drain      one consumer drains -drain-n rows; msgs/s at 1 %, 50 % and 99 % of the drain
  history    -history-rows rows drained from a table that keeps its processed rows, with no
             history and with -history-n processed rows beside them
  queues     one queue's -history-rows rows drained alone and among -queues queues of
             -queue-rows rows each, in one table
  sustained  publishers and a consumer at full rate for -sustain-for (Postgres: dead tuples,
             table size and autovacuum sampled every -sample)

flags:
`

// config is the command's flags.
type config struct {
	dbs     []string
	forms   []string
	dsns    map[string]string
	procs   []int
	workers int
	batches []int
	n       int
	rounds  int
	poll    time.Duration

	drainN       int
	historyN     int
	historyRows  int
	queues       int
	queueRows    int
	sustainFor   time.Duration
	sample       time.Duration
	sustainForm  string
	sustainBatch int
	backlog      int

	ownPostgres bool
	ownSettings []string

	scenarios []string
	out       io.Writer // the tables; progress goes to stderr
}

var scenarios = []string{"procs", "drain", "history", "queues", "sustained"}

// databases are the databases this command runs: the MySQL dialect adds nothing here beside
// MariaDB's, on the same server.
var databases = []string{"postgres", "mariadb", "sqlite"}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	cfg := &config{dsns: map[string]string{}}
	dbs := fs.String("db", "postgres,mariadb", "databases: postgres, mariadb, sqlite (sqlite: drain, history and queues only)")
	forms := fs.String("forms", strings.Join(harness.Forms, ","), "forms: rowlock, lease, advisory (SQLite runs lease only)")
	harness.DSNFlag(fs, cfg.dsns, databases)
	procs := fs.String("procs", "1,2,4,8,16", "procs: consumer process counts, comma-separated")
	fs.IntVar(&cfg.workers, "workers", 4, "workers of each consumer")
	batches := fs.String("batch", "1,16", "rows per claim, comma-separated (above 1: the batch consumer)")
	fs.IntVar(&cfg.n, "n", 10000, "procs: rows per drain")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds per cell")
	fs.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "the consumers' PollInterval")
	fs.IntVar(&cfg.drainN, "drain-n", 1000000, "drain: rows drained")
	fs.IntVar(&cfg.historyN, "history-n", 10000000, "history: processed rows kept beside the rows drained")
	fs.IntVar(&cfg.historyRows, "history-rows", 20000, "history and queues: rows drained per round")
	fs.IntVar(&cfg.queues, "queues", 1000, "queues: queues in the table")
	fs.IntVar(&cfg.queueRows, "queue-rows", 1000, "queues: rows of each queue beside the one drained")
	fs.DurationVar(&cfg.sustainFor, "sustain-for", 10*time.Minute, "sustained: how long publishers and consumer run")
	fs.DurationVar(&cfg.sample, "sample", 10*time.Second, "sustained: sampling interval")
	fs.StringVar(&cfg.sustainForm, "sustain-form", "rowlock", "sustained: the consumer's form")
	fs.IntVar(&cfg.sustainBatch, "sustain-batch", 16, "sustained: rows per claim")
	fs.IntVar(&cfg.backlog, "backlog", 10000, "sustained: publishers pause while this many rows wait")
	fs.BoolVar(&cfg.ownPostgres, "own-postgres", false, "run Postgres on a server of the command's own (initdb in a temporary directory, as shipped but max_connections=200), not -dsn postgres")
	fs.Func("own-postgres-set", "name=value, repeatable: a setting of the -own-postgres server (e.g. autovacuum=off)", func(s string) error {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("-own-postgres-set %q: want name=value", s)
		}
		cfg.ownSettings = append(cfg.ownSettings, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.dbs, err = harness.Names("db", *dbs, databases); err != nil {
		return nil, err
	}
	if cfg.forms, err = harness.Names("forms", *forms, harness.Forms); err != nil {
		return nil, err
	}
	if cfg.procs, err = harness.Ints("procs", *procs); err != nil {
		return nil, err
	}
	if cfg.batches, err = harness.Ints("batch", *batches); err != nil {
		return nil, err
	}
	if !slices.Contains(harness.Forms, cfg.sustainForm) {
		return nil, fmt.Errorf("-sustain-form %q: want one of %s", cfg.sustainForm, strings.Join(harness.Forms, ", "))
	}
	if fs.NArg() == 0 {
		return nil, fmt.Errorf("name a scenario: %s", strings.Join(scenarios, ", "))
	}
	if cfg.scenarios, err = harness.Names("scenario", strings.Join(fs.Args(), ","), scenarios); err != nil {
		return nil, err
	}
	for _, v := range []int{cfg.workers, cfg.n, cfg.rounds, cfg.drainN, cfg.historyN, cfg.historyRows, cfg.queues, cfg.queueRows, cfg.sustainBatch, cfg.backlog} {
		if v < 1 {
			return nil, errors.New("-workers, -n, -rounds, -drain-n, -history-n, -history-rows, -queues, -queue-rows, -sustain-batch and -backlog must be at least 1")
		}
	}
	return cfg, nil
}

// childEnv set to 1 runs the binary as a consumer process of the procs scenario.
const childEnv = "INBOX_SCALE_CHILD"

func main() {
	harness.Main("scale", func(ctx context.Context, args []string) error {
		if os.Getenv(childEnv) == "1" {
			return child(ctx, args, os.Stdin, os.Stdout)
		}
		return run(ctx, args, os.Stdout)
	}, syscall.SIGTERM) // the own Postgres stops either way
}

// run runs the command with args, writing the tables to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	cfg.out = out
	if cfg.ownPostgres {
		dsn, stop, err := startPostgres(cfg.ownSettings)
		if err != nil {
			return err
		}
		defer stop()
		cfg.dsns["postgres"] = dsn
	}
	tmp, err := os.MkdirTemp("", "inbox-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(cfg.out, "Machine: %s\n\n", harness.Machine())
	for _, name := range cfg.dbs {
		dsn := cfg.dsns[name]
		if dsn == "" {
			dsn = harness.DefaultDSNs[name]
		}
		if name == "sqlite" && dsn == "" {
			dsn = tmp + "/scale.db"
		}
		t, err := harness.Open(ctx, name, dsn, cfg.workers+2)
		if err != nil {
			return err
		}
		fmt.Fprintf(cfg.out, "%s: %s\n\n", harness.Label(name), t.Facts(ctx))
		err = runScenarios(ctx, cfg, t)
		t.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// runScenarios runs the scenarios on one database, printing each one's table.
func runScenarios(ctx context.Context, cfg *config, t *harness.Target) error {
	forms := cfg.forms
	if t.Name == "sqlite" {
		forms = []string{"lease"}
	}
	for _, s := range cfg.scenarios {
		var err error
		switch s {
		case "procs":
			if t.Name == "sqlite" {
				continue
			}
			err = runProcs(ctx, cfg, t, forms)
		case "drain":
			err = runDrain(ctx, cfg, t, forms)
		case "history":
			err = runHistory(ctx, cfg, t, forms)
		case "queues":
			err = runQueues(ctx, cfg, t, forms)
		case "sustained":
			if t.Name == "sqlite" {
				continue
			}
			err = runSustained(ctx, cfg, t)
		}
		if err != nil {
			return fmt.Errorf("%s, %s: %w", harness.Label(t.Name), s, err)
		}
	}
	return nil
}

// progress logs one line to stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
