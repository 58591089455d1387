// Command badrow measures what one failing row costs the rows behind it: a row whose handler
// always fails (returns Retry, or panics) is published ahead of -n good rows, and the good
// rows' drain rate is compared with the rate of the same drain without the bad row, per
// database, form and worker count, under the consumer's default retry policy. The target is a
// rate with the bad row of at least 90 % of the rate without it. See docs/benchmarks.md.
//
//	go run ./bench/cmd/badrow                                # from bench/; about 2 minutes
//	go run ./bench/cmd/badrow -db postgres -workers 1 -bad panic -rounds 5
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "badrow:", err)
		os.Exit(1)
	}
}

// config is the command's flags.
type config struct {
	n       int
	rounds  int
	workers []int
	dbs     []string
	forms   []string
	bad     string
	dsns    map[string]string
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("badrow", flag.ContinueOnError)
	c := config{dsns: map[string]string{}}
	fs.IntVar(&c.n, "n", 500, "good rows behind the bad row")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds per cell (the median is reported)")
	workers := fs.String("workers", "1,4", "worker counts")
	dbs := fs.String("db", "postgres,mariadb,sqlite", "databases: "+strings.Join(harness.Databases, ", "))
	forms := fs.String("forms", "rowlock,lease,advisory", "forms (those a database lacks are left out)")
	fs.StringVar(&c.bad, "bad", "retry", "what the bad row's handler does: retry or panic")
	sqlite := fs.String("sqlite", filepath.Join(os.TempDir(), "inbox-badrow.db"), "SQLite file")
	for _, name := range []string{"postgres", "mysql", "mariadb"} {
		fs.StringVar(new(string), "dsn-"+name, harness.DefaultDSNs[name], name+" DSN")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) {
		if name, ok := strings.CutPrefix(f.Name, "dsn-"); ok {
			c.dsns[name] = f.Value.String()
		}
	})
	for _, name := range []string{"postgres", "mysql", "mariadb"} {
		if c.dsns[name] == "" {
			c.dsns[name] = harness.DefaultDSNs[name]
		}
	}
	c.dsns["sqlite"] = *sqlite
	var err error
	if c.workers, err = harness.Ints("workers", *workers); err != nil {
		return c, err
	}
	if c.dbs, err = harness.Names("db", *dbs, harness.Databases); err != nil {
		return c, err
	}
	if c.forms, err = harness.Names("forms", *forms, []string{"rowlock", "lease", "advisory"}); err != nil {
		return c, err
	}
	if c.bad != "retry" && c.bad != "panic" {
		return c, fmt.Errorf("-bad %q: want retry or panic", c.bad)
	}
	return c, nil
}

func run(args []string, out io.Writer) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Fprintf(out, "# badrow: one row that always %s ahead of %d good rows; good rows' msgs/s, median of %d rounds (the two drains of a round take turns at going first); the bad row's deliveries are the most in one drain; %s\n\n",
		map[string]string{"retry": "returns Retry", "panic": "panics"}[c.bad], c.n, c.rounds, harness.Machine())
	fmt.Fprintln(out, "| database | form | workers | without the bad row | with it | ratio | bad row's deliveries |")
	fmt.Fprintln(out, "|---|---|---:|---:|---:|---:|---:|")
	for _, db := range c.dbs {
		t, err := harness.Open(ctx, db, c.dsns[db], slices.Max(c.workers)+3)
		if err != nil {
			return err
		}
		for _, form := range c.forms {
			if !runs(db, form) {
				continue
			}
			for _, w := range c.workers {
				var clean, dirty []float64
				var badRuns []int64
				for round := range c.rounds {
					// The two drains take turns at going first (without, with, with, without, …),
					// so that a machine that slows down or speeds up during a round favours
					// neither.
					for i := range 2 {
						withBad := (round+i)%2 == 1
						bad := ""
						if withBad {
							bad = c.bad
						}
						rate, n, err := drain(ctx, t, form, w, c.n, bad)
						if err != nil {
							return err
						}
						if withBad {
							dirty, badRuns = append(dirty, rate), append(badRuns, n)
						} else {
							clean = append(clean, rate)
						}
					}
				}
				without, with := median(clean), median(dirty)
				fmt.Fprintf(out, "| %s | %s | %d | %.0f | %.0f | %.0f %% | %d |\n", harness.Label(db), form, w, without, with, 100*with/without, slices.Max(badRuns))
			}
		}
		t.Close()
	}
	return nil
}

// runs reports whether form runs on db: SQLite has neither row locks nor session locks.
func runs(db, form string) bool { return db != "sqlite" || form == "lease" }

const table = "inbox_badrow"

// tbl is the bench table: the lifecycle's columns, so that the default policy runs.
var tbl = inbox.Table{Name: table, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
	RetryAfter: "retry_after", DeadAt: "dead_at", LastError: "last_error"}

// create drops and creates the bench table.
func create(ctx context.Context, t *harness.Target) error {
	var cols string
	switch t.Name {
	case "postgres":
		cols = "id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0, retry_after TIMESTAMPTZ, dead_at TIMESTAMPTZ, last_error TEXT, locked_until TIMESTAMPTZ"
	case "sqlite":
		cols = "id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0, retry_after TEXT, dead_at TEXT, last_error TEXT, locked_until TEXT"
	default:
		cols = "id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, attempt INT NOT NULL DEFAULT 0, retry_after DATETIME(6) NULL, dead_at DATETIME(6) NULL, last_error TEXT, locked_until DATETIME(6) NULL"
	}
	for _, s := range []string{"DROP TABLE IF EXISTS " + table, "CREATE TABLE " + table + " (" + cols + ")"} {
		if _, err := t.DB.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", t.Name, s, err)
		}
	}
	if t.Name != "postgres" && t.Name != "sqlite" {
		if _, err := t.DB.ExecContext(ctx, "CREATE INDEX "+table+"_claim ON "+table+" (dead_at, retry_after, id)"); err != nil {
			return err
		}
	}
	return nil
}

// drain fills the table with the bad row (unless bad is empty) and n good rows behind it, runs
// a consumer of w workers until every good row is acked, and returns the good rows' rate and
// how often the bad row was delivered.
func drain(ctx context.Context, t *harness.Target, form string, w, n int, bad string) (float64, int64, error) {
	if err := create(ctx, t); err != nil {
		return 0, 0, err
	}
	var msgs []inbox.Message
	if bad != "" {
		msgs = append(msgs, inbox.Message{Payload: []byte("bad")})
	}
	for i := range n {
		msgs = append(msgs, inbox.Message{Payload: harness.Payload(i + 1)})
	}
	if err := inbox.Enqueue(ctx, t.DB, t.D, tbl, msgs...); err != nil {
		return 0, 0, err
	}
	var f inbox.Form
	switch form {
	case "rowlock":
		f = rowlock.New(t.D, tbl)
	case "lease":
		f = lease.New(t.D, tbl, nil)
	default:
		f = advisory.New(t.D, tbl, nil)
	}
	var good, badRuns atomic.Int64
	done := make(chan struct{})
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		if string(d.Payload) == "bad" {
			badRuns.Add(1)
			if bad == "panic" {
				panic("the bad row")
			}
			return outcome.Retry()
		}
		if good.Add(1) == int64(n) {
			close(done)
		}
		return outcome.Ack()
	})
	cons := inbox.NewConsumer(t.DB, f, h, &inbox.Config{Workers: w, PollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- cons.Run(rctx) }()
	var elapsed time.Duration
	select {
	case <-done:
		elapsed = time.Since(start)
	case err := <-ran:
		cancel()
		return 0, 0, fmt.Errorf("%s %s: Run: %v", t.Name, form, err)
	case <-time.After(2 * time.Minute):
		cancel()
		<-ran
		return 0, 0, fmt.Errorf("%s %s, %d workers: %d of %d good rows in 2 minutes", t.Name, form, w, good.Load(), n)
	}
	cancel()
	if err := <-ran; err != nil {
		return 0, 0, err
	}
	return float64(n) / elapsed.Seconds(), badRuns.Load(), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
